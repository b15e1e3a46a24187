#!lua flags=allow-oom
--[[
  Cancel a run (POST /runs/{id}/cancel): scheduled, waiting, retrying or running, it ends
  'cancelled' with who cancelled it and why, and is not retried (lib/cancel.lua). A run
  id whose attempt failed and was followed by another names its tick: the latest attempt
  is the one cancelled. A DAG task's run settles its task as a failure, so its downstream
  tasks go by their trigger rules (lib/dag.lua); a backfill run frees its place for the
  next backfill tick (lib/backfill.lua). A cancel racing a completion is decided here or
  in complete.lua, whichever runs first: the run ends in exactly one state.

  KEYS[1] ready     STREAM of fired runs (the default queue's; a run of another queue is
                    on its queue's stream, lib/queues.lua)
  KEYS[2] retries   ZSET run id -> when the attempt is due
  KEYS[3] waiting   ZSET run id -> since: runs waiting on a concurrency key's turn
  KEYS[4] dagwait   ZSET released DAG task runs not yet claimed
  ARGV[1] shard key base; run:<id>, runs:<id>, dagrun:<id>, acts:<id>, cnt:<id>, bfq:<id>,
          job:<id>, dagq:<id>, dagv:<id> (with dagvn:<dag>:<tv>, dagvgc:<dag>, dagrunv:<id>), skips:<id>, buf:<id>, events keys are built from it (same
          hash slot)
  ARGV[2] run id
  ARGV[3] who cancels it (the job's log of runs by hand, acts:<job>, gets a 'cancel')
  ARGV[4] why ('' none)

  Returns {1, run id cancelled, the state it was in, its stored queue ('' the default),
  queues}: queues that got runs (0 none; '' the default only; else names, lib/queues.lua:
  a DAG task or backfill tick released);
  {-1} no such run; {-2, run id, state} it had ended already (nothing written).
  allow-oom: a cancel must go through a full Redis (it writes a few bytes).
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include changes
-- @include dag
-- @include backfill
-- @include cancel
-- @include buffer
local ready_key = KEYS[1]
local sets = {retries = KEYS[2], waiting = KEYS[3], dagwait = KEYS[4]}
local base, rid, actor, why = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local run = rcall('HMGET', base .. 'run:' .. rid, 'st', 'nx', 'd', 'bf', 'q')
local hops = 0
while run[1] and run[2] and hops < 1000 do  -- the tick's latest attempt
  rid = run[2]
  run = rcall('HMGET', base .. 'run:' .. rid, 'st', 'nx', 'd', 'bf', 'q')
  hops = hops + 1
end
if not run[1] then
  return {-1}
end
if not CANCELLABLE[run[1]] then
  return {-2, rid, run[1]}
end
local now = server_now_ms()
local reason = cancel_reason(actor, why)
cancel_one(base, sets, rid, run[1], now, actor, reason)
local job = job_of_run(rid)
log_change(base .. 'acts:' .. job, 'cancel', actor, '', rid .. (why ~= '' and (': ' .. why) or ''))
if run[3] then
  dag_settle(base, ready_key, run[3], dag_task_of(rid), 'f', now)
elseif run[4] then
  backfill_done(base, ready_key, job, now)
else
  buffer_ends(base, job, rid, now)  -- a tick its overlap buffered runs next
end
return {1, rid, run[1], run[5] or '', released_queues()}
