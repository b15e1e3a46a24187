#!lua flags=allow-oom
--[[
  A worker puts back claimed runs its concurrency key refused (lua/ck_acquire.lua): each
  leaves its stream (acknowledged, so it holds no lease or worker slot) and waits, state
  'waiting', until its turn comes (lua/unpark_runs.lua). A run granted its turn while
  its worker was on the way here (marked 'ug' by unpark_runs) goes back on its stream
  instead. Only runs the caller still holds are touched.

  KEYS[1] ready    STREAM of fired runs (the default queue's; a run of another queue is
                   on its queue's stream, lib/queues.lua)
  KEYS[2] waiting  ZSET run id -> since (ms): the shard's runs waiting on a key
  ARGV[1] consumer group
  ARGV[2] worker id
  ARGV[3] shard key base; run:<id> keys are built from it (same hash slot)
  ARGV[4..] items of 4: entry id, run id, delivery token, concurrency key

  Returns {the queues runs went back to (lib/queues.lua), a code per item: 1 waiting, 2
  back on its stream (its turn came), 0 not held by the caller (untouched)}.
  allow-oom: a refused run must not keep a worker slot because Redis is full.
]]
local rcall = redis.call
-- @include holder
-- @include clock
-- @include events
-- @include queues
local group, worker, base = ARGV[1], ARGV[2], ARGV[3]
local now = server_now_ms()
local codes = {}
for i = 4, #ARGV, 4 do
  local eid, rid, token, key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'w', 'dt', 'e', 'q', 'ug')
  if holds_run(run, 'running', worker, token, eid) then
    local ready_key = ready_of(base, run[5])
    rcall('XACK', ready_key, group, eid)
    rcall('XDEL', ready_key, eid)
    if run[6] then
      rcall('HDEL', run_key, 'ug')
      rcall('HSET', run_key, 'st', 'scheduled', 'w', '', 'l', '')
      enqueue(base, rid, run[5])
      emit_event(base, rid, 'running', 'scheduled', worker, 'its turn on ' .. key)
      codes[#codes + 1] = 2
    else
      rcall('HSET', run_key, 'st', 'waiting', 'w', '', 'l', '', 'ck', key, 'wt', now)
      rcall('HDEL', run_key, 'b')  -- not started: its next claim says when it starts
      rcall('ZADD', KEYS[2], now, rid)
      emit_event(base, rid, 'running', 'waiting', worker, key)
      codes[#codes + 1] = 1
    end
  else
    codes[#codes + 1] = 0
  end
end
return {woken_queues(), unpack(codes)}
