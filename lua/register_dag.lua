#!lua
--[[
  Register a DAG: its hash (definition, topology, limits), its one timer entry, its place
  in the shard's job and DAG indexes, and a job per task (<dag>.<task>, what workers run).
  The layout of the DAG hash is described in lib/dag.lua.

  KEYS[1] timer   ZSET job_id -> next fire (ms)
  KEYS[2] jobs    ZSET job_id -> creation (ms): the DAG is audited like a job
  KEYS[3] dags    ZSET dag_id -> creation (ms)
  ARGV[1] shard key base; job:<id> keys are built from it (same hash slot)
  ARGV[2] wake channel (published when the DAG has a first fire)
  ARGV[3] shard number
  ARGV[4] dag id
  ARGV[5] DAG spec JSON
  ARGV[6] timing JSON
  ARGV[7] first fire (ms, '' when it never fires)
  ARGV[8] max active runs
  ARGV[9] stall SLA (ms)
  ARGV[10] catch-up code: a all | l latest | n none
  ARGV[11] task names, csv, dependencies first
  ARGV[12] root task names, csv
  ARGV[13] who registers it (the 'by' of version 1)
  ARGV[14..] items of 7 per task: name, dependencies csv, downstream csv, trigger rule
          code (s | d | o | n), task spec JSON, lease (ms), queue ('' the default;
          lib/queues.lua)

  Returns {now_ms, 1}; {now_ms, -1} when the DAG id is taken (nothing written).
]]
local rcall = redis.call
-- @include clock
-- @include jobqueue
local timer_key, jobs_key, dags_key = KEYS[1], KEYS[2], KEYS[3]
local base, dag = ARGV[1], ARGV[4]
local now = server_now_ms()
local dag_key = base .. 'job:' .. dag
if rcall('EXISTS', dag_key) == 1 then
  return {now, -1}
end
rcall('HSET', dag_key, 'kind', 'dag', 'spec', ARGV[5], 'timing', ARGV[6], 'status', 'active',
  'created', now, 'updated', now, 'version', 1, 'first', ARGV[7], 'mar', ARGV[8],
  'sla', ARGV[9], 'cu', ARGV[10], 'tasks', ARGV[11], 'roots', ARGV[12],
  'by', ARGV[13])
for i = 14, #ARGV, 7 do
  local name = ARGV[i]
  rcall('HSET', dag_key, 'd:' .. name, ARGV[i + 1], 'w:' .. name, ARGV[i + 2],
    'g:' .. name, ARGV[i + 3])
  rcall('HSET', base .. 'job:' .. dag .. '.' .. name, 'spec', ARGV[i + 4], 'dag', dag,
    'status', 'active', 'created', now, 'updated', now, 'version', 1, 'lease', ARGV[i + 5])
  set_job_queue(base, base .. 'job:' .. dag .. '.' .. name, ARGV[i + 6], true)
end
rcall('ZADD', jobs_key, now, dag)
rcall('ZADD', dags_key, now, dag)
if ARGV[7] ~= '' then
  rcall('ZADD', timer_key, ARGV[7], dag)
  rcall('PUBLISH', ARGV[2], ARGV[3])
end
return {now, 1}
