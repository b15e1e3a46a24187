#!lua
--[[
  Send a dead-lettered run back (POST /runs/{id}/retry): a new attempt of the same tick,
  <job>:<tick>:<attempt + 1>, scheduled at once; the dead run keeps its record and history,
  leaves the dead-letter set, and points at the new attempt ('nx').

  KEYS[1] ready       STREAM of fired runs
  KEYS[2] deadletter  ZSET run_id -> when it was dead-lettered
  ARGV[1] shard key base; run:<id> and runs:<job> keys are built from it (same hash slot)
  ARGV[2] run id
  ARGV[3] who retries it (the job's log of runs by hand, acts:<job>, gets a 'retry')
  ARGV[4] '1': a run that failed for good (state failed, no next attempt) is sent back
          too (a gap-aware backfill, ops/history/backfill_gaps.py); '' only a dead-lettered one

  Returns {1, new_run_id, queues} (queues: lib/queues.lua); {2, new_run_id} it was retried already (nothing written: a
  double click must not run the job twice); {-1} no such run; {-2} the run is not
  dead-lettered; {-3} the run is a DAG task's: its DAG run settled on its failure,
  so it is resumed by a repair instead (ops/dags/repair.py, lua/repair_dag_run.lua).
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include events
-- @include queues
-- @include changes
local ready_key, dead_key = KEYS[1], KEYS[2]
local base, rid = ARGV[1], ARGV[2]
local run_key = base .. 'run:' .. rid
local run = rcall('HMGET', run_key, 'st', 's', 'd', 'nx', 'args', 'q')
if not run[1] then
  return {-1}
end
if run[4] then
  return {2, run[4]}
end
if run[1] ~= 'dead_letter' and not (run[1] == 'failed' and ARGV[4] == '1') then
  return {-2}
end
if run[3] then
  return {-3}
end
local now = server_now_ms()
local job = job_of_run(rid)
local next_rid = next_attempt(rid)
local next_key = base .. 'run:' .. next_rid
rcall('HSET', next_key, 'st', 'scheduled', 'c', now, 'mr', 1)
carry_to_next(next_key, run[2], run[5], run[6])
local runs_key = base .. 'runs:' .. job
rcall('ZADD', runs_key, rcall('ZSCORE', runs_key, rid) or 0, next_rid)
enqueue(base, next_rid, run[6])
rcall('ZREM', dead_key, rid)
rcall('HSET', run_key, 'nx', next_rid)
log_change(base .. 'acts:' .. job, 'retry', ARGV[3], '', rid .. ' -> ' .. next_rid)
emit_event(base, next_rid, '', 'scheduled', '', 'retry of ' .. rid)
return {1, next_rid, woken_queues()}
