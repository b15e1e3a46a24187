#!lua flags=allow-oom
--[[
  A draining worker hands back runs it will not finish: each goes back to 'scheduled'
  (same attempt) under a new stream entry, so another worker takes it at once instead of
  after its lease. Only runs the caller still holds are touched.

  KEYS[1] ready   STREAM of fired runs (the default queue's; a run of another queue is on
                  its queue's stream, lib/queues.lua)
  ARGV[1] consumer group
  ARGV[2] worker id
  ARGV[3] shard key base; run:<id> keys are built from it (same hash slot)
  ARGV[4..] items of 3: entry id, run id, delivery token

  Returns {runs handed back, the queues they went back to (lib/queues.lua)}.

  allow-oom: runs while Redis is full (it adds no more than a few bytes), so leases and
  registrations hold and no owner or worker loses its work to a full Redis.
]]
local rcall = redis.call
-- @include holder
-- @include events
-- @include queues
local group, worker, base = ARGV[1], ARGV[2], ARGV[3]
local released = 0
for i = 4, #ARGV, 3 do
  local eid, rid, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'w', 'dt', 'e', 'q')
  local ready_key = ready_of(base, run[5])
  local pending = rcall('XPENDING', ready_key, group, eid, eid, 1)
  if holds_run(run, 'running', worker, token, eid)
      and pending[1] and pending[1][2] == worker then
    rcall('XACK', ready_key, group, eid)
    rcall('XDEL', ready_key, eid)
    rcall('HSET', run_key, 'st', 'scheduled', 'w', '', 'l', '')
    enqueue(base, rid, run[5])
    emit_event(base, rid, 'running', 'scheduled', worker, 'released')
    released = released + 1
  end
end
return {released, woken_queues()}
