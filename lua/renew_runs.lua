#!lua flags=allow-oom
--[[
  A worker extends the leases of its in-flight runs of one shard, in one call. Applied
  only where the caller still holds the run (stream entry pending on it and the one the
  run was claimed from, delivery token matching); the pending entry's idle time is reset, so the owner's reclaim scan passes it.

  KEYS[1] ready   STREAM of fired runs (the default queue's; a run of another queue is on
                  its queue's stream, lib/queues.lua)
  ARGV[1] consumer group
  ARGV[2] worker id
  ARGV[3] shard key base; run:<id> and job:<id> keys are built from it (same hash slot)
  ARGV[4..] items of 3: entry id, run id, delivery token

  Returns {now_ms, code1, lease1, code2, lease2, ...}: code 1 renewed (lease = the new
  deadline, ms); -2 the caller no longer holds the run (recorded in its 'sx'); -3 the run
  was cancelled (the worker must stop it).

  allow-oom: runs while Redis is full (it adds no more than a few bytes), so leases and
  registrations hold and no owner or worker loses its work to a full Redis.
]]
local rcall = redis.call
-- @include holder
-- @include runids
-- @include clock
-- @include queues
local group, worker, base = ARGV[1], ARGV[2], ARGV[3]
local now = server_now_ms()
local now_n = tonumber(now)
local out = {now}

local function pending_owner(ready_key, eid)
  local pending = rcall('XPENDING', ready_key, group, eid, eid, 1)
  return pending[1] and pending[1][2]
end

for i = 4, #ARGV, 3 do
  local eid, rid, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'w', 'dt', 'e', 'q')
  local ready_key = ready_of(base, run[5])
  if run[1] == 'cancelled' then
    out[#out + 1] = -3
    out[#out + 1] = 0
  elseif holds_run(run, 'running', worker, token, eid)
      and pending_owner(ready_key, eid) == worker then
    rcall('XCLAIM', ready_key, group, worker, 0, eid, 'JUSTID')  -- resets its idle time
    local job = job_of_run(rid)
    local lease = now_n + tonumber(rcall('HGET', base .. 'job:' .. job, 'lease') or '30000')
    rcall('HSET', run_key, 'l', lease)
    out[#out + 1] = 1
    out[#out + 1] = lease
  else
    if run[1] then
      rcall('HINCRBY', run_key, 'sx', 1)
    end
    out[#out + 1] = -2
    out[#out + 1] = 0
  end
end
return out
