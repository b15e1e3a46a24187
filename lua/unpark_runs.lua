#!lua flags=allow-oom
--[[
  Waiting runs whose turn came on their concurrency key (lua/ck_acquire.lua, ck_release,
  ck_set, ck_sweep granted them) go back on their ready stream, state 'scheduled': the
  worker that claims one is granted the key at once. Idempotent: a run already back is
  left as it is.

  KEYS[1] ready    STREAM of fired runs (the default queue's; a run of another queue is
                   on its queue's stream, lib/queues.lua)
  KEYS[2] waiting  ZSET run id -> since (ms): the shard's runs waiting on a key
  ARGV[1] shard key base; run:<id> keys are built from it (same hash slot)
  ARGV[2..] run ids

  Returns {the queues runs went to (lib/queues.lua), a code per run: 1 put back; 2 still
  with the worker that was refused (marked 'ug': lua/park_runs.lua puts it back); 3
  already scheduled or running (it keeps its grant); 0 gone or ended (the caller gives
  its grant back: lua/ck_release.lua)}.
  allow-oom: a granted run must start even while Redis is full.
]]
local rcall = redis.call
-- @include events
-- @include queues
local base = ARGV[1]
local codes = {}
for i = 2, #ARGV do
  local rid = ARGV[i]
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'q', 'w', 'ck')
  if run[1] == 'waiting' then
    rcall('HSET', run_key, 'st', 'scheduled')
    rcall('ZREM', KEYS[2], rid)
    enqueue(base, rid, run[2])
    emit_event(base, rid, 'waiting', 'scheduled', '', 'its turn on ' .. (run[4] or ''))
    codes[#codes + 1] = 1
  elseif run[1] == 'running' and run[3] and run[3] ~= '' then
    rcall('HSET', run_key, 'ug', '1')
    codes[#codes + 1] = 2
  elseif run[1] == 'scheduled' or run[1] == 'claimed' or run[1] == 'running' then
    codes[#codes + 1] = 3
  else
    codes[#codes + 1] = 0
  end
end
return {woken_queues(), unpack(codes)}
