#!lua flags=allow-oom
--[[
  Repair a DAG run (POST /dag-runs/{id}/clear and /mark, and the retry of a dead-lettered
  task's run): each task the plan names goes back to waiting and is decided again by its
  trigger rule, as a new attempt under the same DAG run (its earlier attempts stay, each
  pointing at the next, 'nx'); a mark gives one task an outcome by hand, as a new attempt
  that records who and why, and its downstream reacts as if it had ended so. Applied only
  while the DAG run is as the plan read it (its fingerprint: its state, and each task's
  state and latest run), so a plan is applied once: applying it again, or after anything
  moved, is refused and writes nothing. A DAG run that had ended opens again (it holds its
  version and a slot under max_active_runs again); its outcome is decided anew by the
  trigger rules when its tasks end (lib/dag.lua).

  KEYS[1] ready       STREAM of fired runs (the default queue's)
  KEYS[2] deadletter  ZSET run id -> when it was dead-lettered
  ARGV[1] shard key base; dagrun:<id>, run:<id>, runs:<id>, job:<dag>, dagv:<dag>:<tv>,
          dagvn:<dag>:<tv>, dagvgc:<dag> and acts:<dag> are built from it (and lib/dag's;
          same hash slot)
  ARGV[2] DAG run id
  ARGV[3] the fingerprint the plan was made on (core/dag_repair.py)
  ARGV[4] who repairs it (the DAG's log of runs by hand, acts:<dag>, gets 'clear' or 'mark')
  ARGV[5] a note ('' none)
  ARGV[6] the dead-lettered run a retry names ('' none): its 'nx' answers a second retry
  ARGV[7] the task marked ('' a clear)
  ARGV[8] its outcome: 's' succeeded | 'f' failed ('' a clear)
  ARGV[9] n: how many of the names that follow are the DAG run's tasks
  ARGV[10..] names: the DAG run's n tasks in the DAG's order (what the fingerprint reads),
          then the tasks set back to waiting, each after its upstream

  Returns {1, queues (lib/queues.lua), new run ids...}; {2, run id} the dead-lettered run
  was retried already; {-1} no such DAG run; {-2, state} a DAG run in that state is not
  repaired (queued, cancelled, skipped); {-3} the DAG run moved since the plan. A DAG run
  whose version is no longer kept is repaired on the DAG's current one (its tasks are all
  there: the plan checked), and records that version ('tv', dagrunv:<id>).
  allow-oom: a repair of what failed must go through a full Redis.
]]
local rcall = redis.call
-- @include clock
-- @include events
-- @include changes
-- @include counters
-- @include dag
local ready, dead_key = KEYS[1], KEYS[2]
local base, drid, planned_on, actor = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local note, from_rid, marked, outcome = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local n = tonumber(ARGV[9])
local run_key = base .. 'dagrun:' .. drid

-- The DAG run as a plan reads it: its state, each task's state and latest run.
local function fingerprint()
  local fields = {'st'}
  for i = 10, 9 + n do
    fields[#fields + 1] = 't:' .. ARGV[i]
    fields[#fields + 1] = 'r:' .. ARGV[i]
  end
  local values = rcall('HMGET', run_key, unpack(fields))
  local parts = {}
  for i, field in ipairs(fields) do
    parts[i] = field .. '=' .. (values[i] or '')
  end
  return redis.sha1hex(table.concat(parts, '\n'))
end

local st = rcall('HGET', run_key, 'st')
if not st then
  return {-1}
end
if from_rid ~= '' then
  local nx = rcall('HGET', base .. 'run:' .. from_rid, 'nx')
  if nx then
    return {2, nx}
  end
end
if st ~= 'running' and st ~= 'succeeded' and st ~= 'failed' then
  return {-2, st}
end
if fingerprint() ~= planned_on then
  return {-3}
end
local dag, tick = string.match(drid, '^([^:]+):([^:]+)$')
local now = server_now_ms()
if st ~= 'running' then  -- it ended: it opens again, on the version it ran on
  local tv = dag_given(base, drid)
  local current = rcall('HGET', base .. 'job:' .. dag, 'tv') or '1'
  if tv and tv ~= current and rcall('EXISTS', base .. 'dagv:' .. dag .. ':' .. tv) == 1 then
    rcall('INCR', base .. 'dagvn:' .. dag .. ':' .. tv)
    rcall('SREM', base .. 'dagvgc:' .. dag, tv)
  elseif tv then
    if tv ~= current then  -- its version is no longer kept: it runs on the current one
      rcall('HSET', base .. 'dagrunv:' .. drid, 'tv', current)
      rcall('HSET', run_key, 'tv', current)
    end
    counter_add(base, dag, 'ntv', 1)
  end
  counter_add(base, dag, 'nact', 1)
  rcall('HSET', run_key, 'st', 'running')
  rcall('HDEL', run_key, 'f')
  emit_event(base, drid, st, 'running', '', marked ~= '' and 'marked' or 'cleared')
end

local before, named = {}, {}
for i = 10 + n, #ARGV do  -- back to waiting: counted as not ended, out of the dead letter
  local task = ARGV[i]
  local code = rcall('HGET', run_key, 't:' .. task)
  if code == 'f' then
    rcall('HINCRBY', run_key, 'nf', -1)
  end
  rcall('HINCRBY', run_key, 'n', 1)
  rcall('HSET', run_key, 't:' .. task, 'w')
  local prev = rcall('HGET', run_key, 'r:' .. task)
  if prev then
    rcall('ZREM', dead_key, prev)
  end
  before[task] = prev or ''
  named[#named + 1] = task
end

local dag_key = dag_topo(base, dag, drid)
local s = rcall('HGET', run_key, 's')
local made = {}
if marked ~= '' then  -- a new attempt with the outcome given, then its downstream reacts
  local code = rcall('HGET', run_key, 't:' .. marked)
  if code == 'f' then
    rcall('HINCRBY', run_key, 'nf', -1)
  end
  if code ~= 'w' then
    rcall('HINCRBY', run_key, 'n', 1)
  end
  local rid, prev = dag_next_rid(base, dag, drid, tick, marked)
  local state = outcome == 's' and 'succeeded' or 'failed'
  local why = 'marked ' .. state .. ' by ' .. actor .. (note ~= '' and (': ' .. note) or '')
  local rid_key = base .. 'run:' .. rid
  rcall('HSET', rid_key, 'st', state, 'c', now, 'f', now, 'r', why, 'd', drid, 'mk', actor)
  if s ~= tick then
    rcall('HSET', rid_key, 's', s)
  end
  rcall('ZADD', base .. 'runs:' .. dag .. '.' .. marked, s, rid)
  if prev then
    rcall('HSET', base .. 'run:' .. prev, 'nx', rid)
    rcall('ZREM', dead_key, prev)
  end
  emit_event(base, rid, '', state, '', why)
  rcall('HSET', run_key, 't:' .. marked, 'q', 'r:' .. marked, rid)
  made[#made + 1] = rid
  dag_settle(base, ready, drid, marked, outcome, now)
end

local sla = rcall('HGET', dag_key, 'sla')
for _, task in ipairs(named) do  -- upstream first: each decided once its upstream is
  if rcall('HGET', run_key, 't:' .. task) == 'w' then
    local verdict, reason = dag_verdict(run_key, dag_key, task)
    if verdict == 'release' then
      dag_release(base, ready, dag, drid, tick, s, task, now, sla)
    elseif verdict == 'skip' then
      dag_skip(base, dag, drid, tick, s, task, now, reason)
      rcall('HINCRBY', run_key, 'n', -1)
      dag_cascade(base, ready, drid, dag, tick, dag_key, {task}, now)
    end
  end
end
for _, task in ipairs(named) do
  local latest = rcall('HGET', run_key, 'r:' .. task)
  if latest and latest ~= before[task] then
    made[#made + 1] = latest
  end
end
if rcall('HGET', run_key, 'st') == 'running' and tonumber(rcall('HGET', run_key, 'n')) <= 0 then
  dag_finish(base, ready, dag, drid, now)
end
local what = marked ~= '' and (marked .. ' ' .. outcome) or table.concat(named, ',')
log_change(base .. 'acts:' .. dag, marked ~= '' and 'mark' or 'clear', actor, '',
  drid .. ' ' .. what .. (note ~= '' and (': ' .. note) or ''))
local reply = {1, woken_queues()}
for _, rid in ipairs(made) do
  reply[#reply + 1] = rid
end
return reply
