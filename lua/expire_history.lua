#!lua
--[[
  The shard owner removes the history its retention moved to the cold archive (written
  there first: shard/retention.py): finished runs, settled DAG runs and old skip records;
  and trims the shard's event stream to the retention window (it is capped by count too).
  Each is removed only if it is still exactly what was archived. A run must still be in
  its terminal state with the finish time the archiver read, not an unhandled dead letter
  (listed in the dead-letter set), and, for a DAG task's run, with its DAG run settled. A
  DAG run must still be settled with the same finish time. Anything else stays hot; its
  archived copy is then shadowed by the hot record on read, so nothing shows twice.

  Removing a run deletes its record and output and takes it out of its job's runs index
  and the failure inbox;
  a DAG run, its hash and its entry in the DAG's runs index; a skip record, its entry.

  KEYS[1] epoch       STRING the shard's fencing token
  KEYS[2] deadletter  ZSET run_id -> when it was dead-lettered
  KEYS[3] stats       HASH shard counters ('expired': items removed so far)
  KEYS[4] events      STREAM the shard's run transitions
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; run:<id>, out:<id>, runs:<id>, dagrun:<id>, dagrunv:<id>,
          args:<job>:<tick>, skips:<id>, job:<id>
          and cnt:<id> (its output count 'ob', given back) and failures (the failure inbox) keys are
          built from it (same hash slot)
  ARGV[3] events older than this (ms) are trimmed ('' none)
  ARGV[4..] items of 3: kind (r a run | d a DAG run | s a skip record), id (the run or
          DAG run id; a skip record's job id), check (a run's or DAG run's finish time in
          ms as archived, '' for none; the skip record itself)

  Returns {1, removed, kept}, or {-1} when the caller's epoch is stale.
]]
local rcall = redis.call
-- @include runids
-- @include outquota
local epoch_key, dead_key, stats_key, events_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base = ARGV[2]
if rcall('GET', epoch_key) ~= ARGV[1] then
  rcall('HINCRBY', stats_key, 'refused_fire', 1)
  return {-1}
end
local terminal = {succeeded = true, failed = true, dead_letter = true, skipped = true,
  cancelled = true}
local settled = {succeeded = true, failed = true, cancelled = true}

local function expire_run(rid, finished)
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'f', 'd', 'nx')
  if not (run[1] and terminal[run[1]] and (run[2] or '') == finished)
      or rcall('ZSCORE', dead_key, rid) then
    return 0
  end
  if run[3] then
    local dag_state = rcall('HGET', base .. 'dagrun:' .. run[3], 'st')
    if dag_state and not settled[dag_state] then
      return 0
    end
  end
  local job, tick = parse_run_id(rid)
  forget_output(base, job, base .. 'out:' .. rid)
  rcall('DEL', run_key, base .. 'out:' .. rid)
  if string.byte(tick, 1) == 116 and not run[4] then
    rcall('DEL', base .. 'args:' .. job .. ':' .. tick)  -- its tick's last attempt
  end
  rcall('ZREM', base .. 'runs:' .. job, rid)
  rcall('ZREM', base .. 'failures', rid)
  return 1
end

local function expire_dag_run(drid, finished)
  local key = base .. 'dagrun:' .. drid
  local run = rcall('HMGET', key, 'st', 'f')
  if not (run[1] and settled[run[1]] and (run[2] or '') == finished) then
    return 0
  end
  rcall('DEL', key, base .. 'dagrunv:' .. drid)
  rcall('ZREM', base .. 'runs:' .. string.match(drid, '^(.+):[^:]+$'), drid)
  return 1
end

local removed, kept = 0, 0
if ARGV[3] ~= '' then
  rcall('XTRIM', events_key, 'MINID', '~', ARGV[3])
end
for i = 4, #ARGV, 3 do
  local kind, id, check = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local n
  if kind == 'r' then
    n = expire_run(id, check)
  elseif kind == 'd' then
    n = expire_dag_run(id, check)
  else
    n = rcall('ZREM', base .. 'skips:' .. id, check)
  end
  removed, kept = removed + n, kept + 1 - n
end
if removed > 0 then
  rcall('HINCRBY', stats_key, 'expired', removed)
end
return {1, removed, kept}
