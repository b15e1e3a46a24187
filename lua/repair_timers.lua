#!lua
--[[
  Liveness: put back the timer entries of active jobs found without one
  (check_timers.lua), each re-planned from its definition by the owner, as a recorded
  decision: the job's change log gets a 'repair', the shard's 'timer_repairs' counter
  grows. The entry goes back at the first tick after the last one the job's ledger
  knows, so its ordinary catch-up policy decides the ticks it lost (fired late, or
  recorded skipped), as after any outage. An item whose job changed meanwhile (paused,
  deleted, given a timer entry, exhausted) is left alone.

  KEYS[1] timer   ZSET job_id -> next fire (ms)
  KEYS[2] epoch   STRING the shard's fencing token
  KEYS[3] stats   HASH shard counters: timer_repairs
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; job:<id> and chg:<id> are built from it (same hash slot)
  ARGV[3] wake channel (published once if an entry was put back)
  ARGV[4] shard number
  ARGV[5..] items of 2: job id, the timer score to put back (ms; '' when its schedule
          fires no more: the job is marked exhausted, 'nf')

  Keys built from the shard key base (each in KEYS' hash slot): chg:<id>, job:<id>.

  Returns {1, repaired, job1, ...} (the jobs put back or marked), or {-1} when the
  caller's epoch is stale.
]]
local rcall = redis.call
-- @include changes
local timer_key, epoch_key, stats_key = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[2]
if rcall('GET', epoch_key) ~= ARGV[1] then
  return {-1}
end
local out = {1, 0}
local wake = false
for i = 5, #ARGV, 2 do
  local job, at = ARGV[i], ARGV[i + 1]
  local job_key = base .. 'job:' .. job
  local f = rcall('HMGET', job_key, 'status', 'dag', 'nf', 'version')
  if f[1] == 'active' and not f[2] and not f[3] and not rcall('ZSCORE', timer_key, job) then
    if at == '' then
      rcall('HSET', job_key, 'nf', 'exhausted')
      log_change(base .. 'chg:' .. job, 'repair', 'scheduler', f[4],
        'no timer entry and no next fire: marked exhausted')
    else
      rcall('ZADD', timer_key, at, job)
      wake = true
      log_change(base .. 'chg:' .. job, 'repair', 'scheduler', f[4],
        'its timer entry was missing: re-planned for ' .. at)
    end
    out[2] = out[2] + 1
    out[#out + 1] = job
  end
end
if out[2] > 0 then
  rcall('HINCRBY', stats_key, 'timer_repairs', out[2])
end
if wake then
  rcall('PUBLISH', ARGV[3], ARGV[4])
end
return out
