#!lua
--[[
  The owner's watch over its shard's deadlines: runs not started, or not finished, by
  their deadline (fire.lua indexed each by its planned time plus the job's
  start_deadline_s / finish_deadline_s), and jobs whose dead-man's switch is due (no
  successful run within expect_success_within_s). Each miss is recorded: on the run
  ('dlm' = start | finish), as an event (detail 'deadline: …' / 'no success: …', which
  notifications turn into deadline_missed), in the shard's 'deadlines_missed' counter. A
  run not started in time whose job asked for it ('sk|') is skipped instead, recorded as
  such. A dead-man's switch is armed again for another stretch.

  KEYS[1] deadlines ZSET s|<run>, sk|<run>, f|<run> -> deadline (ms)
  KEYS[2] deadman   ZSET job_id -> when a success is due (ms)
  KEYS[3] epoch     STRING the shard's fencing token
  KEYS[4] stats     HASH shard counters: deadlines_missed
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; run:<id>, job:<id> and the events stream are built from it
  ARGV[3] how many of each to look at, at most

  Keys built from the shard key base (each in KEYS' hash slot): events, job:<id>,
    run:<id>.

  Returns {1, started_late, finished_late, skipped, silent, job1, ...} (the jobs whose
  dead-man's switch fired), or {-1} when the caller's epoch is stale.
]]
local rcall = redis.call
-- @include clock
-- @include events
local deadlines_key, deadman_key, epoch_key, stats_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base = ARGV[2]
if rcall('GET', epoch_key) ~= ARGV[1] then
  return {-1}
end
local now = server_now_ms()
local count = tonumber(ARGV[3])
local UNFINISHED = {scheduled = true, claimed = true, running = true, retrying = true,
  waiting = true}
local started_late, finished_late, skipped = 0, 0, 0
for _, member in ipairs(rcall('ZRANGE', deadlines_key, '-inf', now, 'BYSCORE',
    'LIMIT', 0, count)) do
  local kind, rid = string.match(member, '^(%a+)|(.+)$')
  local run_key = base .. 'run:' .. rid
  if kind == 's' or kind == 'sk' then
    local st = rcall('HGET', run_key, 'st')
    if st == 'scheduled' or st == 'waiting' then
      started_late = started_late + 1
      rcall('HSET', run_key, 'dlm', 'start')
      if kind == 'sk' and st == 'scheduled' then
        skipped = skipped + 1
        rcall('HSET', run_key, 'st', 'skipped', 'f', now, 'r', 'start_deadline')
        emit_event(base, rid, st, 'skipped', '', 'deadline: not started by its start deadline')
      else
        emit_event(base, rid, st, st, '', 'deadline: not started by its start deadline')
      end
    end
  elseif kind == 'f' then
    local last = rid
    for _ = 1, 100 do  -- its last attempt
      local nx = rcall('HGET', base .. 'run:' .. last, 'nx')
      if not nx then break end
      last = nx
    end
    local st = rcall('HGET', base .. 'run:' .. last, 'st')
    if st and UNFINISHED[st] then
      finished_late = finished_late + 1
      rcall('HSET', base .. 'run:' .. last, 'dlm', 'finish')
      emit_event(base, last, st, st, '', 'deadline: not finished by its finish deadline')
    end
  end
  rcall('ZREM', deadlines_key, member)
end
local out = {1, started_late, finished_late, skipped, 0}
for _, job in ipairs(rcall('ZRANGE', deadman_key, '-inf', now, 'BYSCORE', 'LIMIT', 0, count)) do
  local f = rcall('HMGET', base .. 'job:' .. job, 'status', 'dms')
  if f[1] == 'active' and f[2] then
    out[5] = out[5] + 1
    out[#out + 1] = job
    emit_event(base, job, 'active', 'active', '',
      'no success: no successful run within ' .. (tonumber(f[2]) / 1000) .. ' s')
    rcall('ZADD', deadman_key, now + tonumber(f[2]), job)
  elseif f[1] == 'paused' and f[2] then
    rcall('ZADD', deadman_key, now + tonumber(f[2]), job)  -- silent on purpose: not owed
  else
    rcall('ZREM', deadman_key, job)
  end
end
local missed = started_late + finished_late + out[5]
if missed > 0 then
  rcall('HINCRBY', stats_key, 'deadlines_missed', missed)
end
return out
