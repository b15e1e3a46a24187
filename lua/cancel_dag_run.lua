#!lua flags=allow-oom
--[[
  Cancel a whole DAG run (POST /dag-runs/{id}/cancel). A queued one leaves the DAG's queue.
  A running one: each task run not yet ended is cancelled (lib/cancel.lua: a worker
  running one stops it), each task still waiting is skipped with the reason 'cancelled',
  and the DAG run ends 'cancelled' at once with who and why ('cb', 'rs'), freeing its
  slot under max_active_runs (a queued run may start: lib/dag.lua).

  KEYS[1] ready     STREAM of fired runs (the default queue's)
  KEYS[2] retries   ZSET run id -> when the attempt is due
  KEYS[3] waiting   ZSET run id -> since: runs waiting on a concurrency key's turn
  KEYS[4] dagwait   ZSET released DAG task runs not yet claimed
  ARGV[1] shard key base; dagrun:<id>, dagq:<id>, dagv:<id> (with dagvn:<dag>:<tv>, dagvgc:<dag>, dagrunv:<id>), job:<id>, cnt:<id>,
          run:<id>, runs:<id>, acts:<id>, skips:<id>, events keys are built from it (same
          hash slot)
  ARGV[2] DAG run id
  ARGV[3] who cancels it (the DAG's log of runs by hand, acts:<dag>, gets a 'cancel')
  ARGV[4] why ('' none)

  Returns {1, the state it was in, queues (0 none, '' the default only, else names: a
  queued DAG run started), cancelled task runs as items of 3: run id, the
  state it was in, its stored queue}; {-1} no such DAG run; {-2, state} it had ended.
  allow-oom: a cancel must go through a full Redis.
]]
local rcall = redis.call
-- @include clock
-- @include events
-- @include changes
-- @include counters
-- @include dag
-- @include cancel
local ready_key = KEYS[1]
local sets = {retries = KEYS[2], waiting = KEYS[3], dagwait = KEYS[4]}
local base, drid, actor, why = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local run_key = base .. 'dagrun:' .. drid
local st = rcall('HGET', run_key, 'st')
if not st then
  return {-1}
end
if st ~= 'queued' and st ~= 'running' then
  return {-2, st}
end
local now = server_now_ms()
local reason = cancel_reason(actor, why)
local dag, tick = string.match(drid, '^([^:]+):([^:]+)$')
local out = {1, st, ''}
if st == 'queued' then
  rcall('ZREM', base .. 'dagq:' .. dag, drid)
else
  local s = rcall('HGET', run_key, 's')
  for _, task in ipairs(dag_split(rcall('HGET', dag_topo(base, dag, drid), 'tasks'))) do
    local code = rcall('HGET', run_key, 't:' .. task)
    if code == 'w' then
      dag_skip(base, dag, drid, tick, s, task, now, 'cancelled')
    elseif code == 'q' then
      local rid = rcall('HGET', run_key, 'r:' .. task)
      local run = rid and rcall('HMGET', base .. 'run:' .. rid, 'st', 'q')
      if run and CANCELLABLE[run[1] or ''] then
        cancel_one(base, sets, rid, run[1], now, actor, reason)
        out[#out + 1], out[#out + 2], out[#out + 3] = rid, run[1], run[2] or ''
      end
      rcall('HSET', run_key, 't:' .. task, 'f')
    end
  end
  rcall('HSET', run_key, 'n', 0)
  counter_add(base, dag, 'nact', -1)
end
rcall('HSET', run_key, 'st', 'cancelled', 'f', now, 'rs', reason, 'cb', actor)
dag_release_version(base, dag, drid)
emit_event(base, drid, st, 'cancelled', '', reason)
log_change(base .. 'acts:' .. dag, 'cancel', actor, '', drid .. (why ~= '' and (': ' .. why) or ''))
if st == 'running' then
  dag_promote(base, ready_key, dag, now)
end
out[3] = released_queues()
return out
