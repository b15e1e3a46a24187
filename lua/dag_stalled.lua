#!lua
--[[
  The shard owner reports DAG task runs released and still not claimed past their DAG's
  stall SLA (the seed's dag_stalled): each is marked on its run ('stl', when) and counted
  once, on the shard ('dag_stalled'), its DAG ('stalled') and its DAG run ('stl').

  KEYS[1] dagwait ZSET run_id -> stall deadline (ms)
  KEYS[2] epoch   STRING the shard's fencing token
  KEYS[3] stats   HASH shard counters
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; run:<id> and dagrun:<id> keys are built from it (same hash slot)
  ARGV[3] how many to look at, at most

  Keys built from the shard key base (each in KEYS' hash slot): dagrun:<id>, job:<id>,
    run:<id>, and the events stream: each stalled run is an event (scheduled>scheduled,
    detail 'stalled: ...'), which notifications hear of as a missed deadline.

  Returns {1, stalled, dag_id1, dag_id2, ...} (the DAG of each stalled run), or {-1}
  when the caller's epoch is stale.
]]
local rcall = redis.call
-- @include clock
-- @include events
local wait_key, epoch_key, stats_key = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[2]
if rcall('GET', epoch_key) ~= ARGV[1] then
  rcall('HINCRBY', stats_key, 'refused_fire', 1)
  return {-1}
end
local now = server_now_ms()
local stalled = 0
local dags = {}
for _, rid in ipairs(rcall('ZRANGE', wait_key, '-inf', now, 'BYSCORE', 'LIMIT', 0, ARGV[3])) do
  local run = rcall('HMGET', base .. 'run:' .. rid, 'st', 'd')
  if run[1] == 'scheduled' then
    rcall('HSET', base .. 'run:' .. rid, 'stl', now)
    emit_event(base, rid, 'scheduled', 'scheduled', '',
      'stalled: released and still unclaimed past its DAG\'s stall SLA')
    if run[2] then
      rcall('HINCRBY', base .. 'dagrun:' .. run[2], 'stl', 1)
      local dag = string.match(run[2], '^([^:]+)')
      rcall('HINCRBY', base .. 'job:' .. dag, 'stalled', 1)
      dags[#dags + 1] = dag
    end
    stalled = stalled + 1
  end
  rcall('ZREM', wait_key, rid)
end
if stalled > 0 then
  rcall('HINCRBY', stats_key, 'dag_stalled', stalled)
end
local out = {1, stalled}
for _, dag in ipairs(dags) do
  out[#out + 1] = dag
end
return out
