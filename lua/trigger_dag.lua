#!lua
--[[
  Manual DAG trigger: open a DAG run now, outside the schedule. It counts toward
  max_active_runs: with no room it is queued (whatever the catch-up policy: it was asked
  for) and starts when a run ends.

  KEYS[1] dag     HASH the DAG (job:<dag>)
  KEYS[2] ready   STREAM of fired runs
  ARGV[1] shard key base (lib/dag builds its keys from it, dagv:<dag>:<tv> (with dagvn:<dag>:<tv>, dagvgc:<dag>, dagrunv:<id>) too)
  ARGV[2] dag id
  ARGV[3] who triggers it (the DAG's log of runs by hand, acts:<dag>, gets a 'trigger')
  ARGV[4] the DAG run's args JSON, shared by its tasks ('': none; claim.lua hands a task's
          run its DAG run's)

  Keys built from the shard key base (each in KEYS' hash slot): cnt:<id>, dagq:<id>, dagrun:<id>,
    dagwait, job:<id>, run:<id>, runs:<id>, skips:<id>.

  Returns {code, dag_run_id, now_ms, queues} with code 1 started or 2 queued (queues:
  what the root tasks went to, lib/queues.lua); {-1} no such DAG;
  {-2} the DAG is deleted. DAG run ids are <dag>:t<n> with n the DAG's trigger count.
]]
local rcall = redis.call
-- @include live
-- @include clock
-- @include queues
-- @include changes
local dag_key, ready_key = KEYS[1], KEYS[2]
local base, dag = ARGV[1], ARGV[2]

-- @include dag

local refusal = dag_refusal(rcall('HMGET', dag_key, 'status', 'version', 'kind'), nil)
if refusal then
  return refusal
end
local now = server_now_ms()
local n = rcall('HINCRBY', dag_key, 'triggers', 1)
local code, drid = dag_open(base, ready_key, dag, 't' .. n, now, now, true)
if ARGV[4] ~= '' then
  rcall('HSET', base .. 'dagrun:' .. drid, 'args', ARGV[4])  -- shown
  rcall('HSET', base .. 'dagrunv:' .. drid, 'args', ARGV[4])  -- what its tasks run with
end
log_change(base .. 'acts:' .. dag, 'trigger', ARGV[3], '', drid)
return {code, drid, now, woken_queues()}
