#!lua
--[[
  An event, or an upstream's outcome, delivered to a DAG that listens to it or runs after
  it (lua/deliver_event.lua does the same for a job): a DAG run now (queued under
  max_active_runs as a trigger by hand is), unless the delivery's key came to the DAG
  before (the earlier DAG run, or the earlier delivery still held), or the DAG is paused
  (then held, kept latest or dropped as its rule says; lua/release_held.lua opens them).

  KEYS[1] dag     HASH the DAG (job:<dag>)
  KEYS[2] ready   STREAM of fired runs
  ARGV[1] shard key base; dagrun:<id>, idem:<dag>:<key>, evheld:<dag>, evheldjobs and
          lib/dag's keys (dagv:<dag>:<tv> (with dagvn:<dag>:<tv>, dagvgc:<dag>,
          dagrunv:<id>)) are built from it (same hash slot)
  ARGV[2] dag id
  ARGV[3] the DAG run's cause: 'event:<event id>' or 'after:<upstream run id>'
  ARGV[4] the DAG run's args JSON, shared by its tasks ('': none)
  ARGV[5] the delivery's key (store/event_delivery.py)
  ARGV[6] how long a key is remembered (ms)
  ARGV[7] when the DAG is paused: hold | keep_latest | drop
  ARGV[8] deliveries held at most

  Keys built from the shard key base (each in KEYS' hash slot): cnt:<id>, dagq:<id>,
    dagrun:<id>, dagwait, job:<id>, run:<id>, runs:<id>, skips:<id>, outq.

  Returns {1, dag_run_id, now_ms, queues} a DAG run opened (started or queued); {2,
  first, now_ms, cause} the key came before; {3, held, superseded...} held; {4, why}
  dropped; {-1} no such DAG; {-2} deleted.
]]
local rcall = redis.call
-- @include live
-- @include clock
-- @include queues
-- @include deliveries
local dag_key, ready_key = KEYS[1], KEYS[2]
local base, dag, cause, args, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

-- @include dag

local refusal = dag_refusal(rcall('HMGET', dag_key, 'status', 'version', 'kind'), nil)
if refusal then
  return refusal
end
local now = server_now_ms()
local idem_key = base .. 'idem:' .. dag .. ':' .. key
local first = rcall('GET', idem_key)
if first then
  local first_cause = ''
  if string.sub(first, 1, 5) ~= 'held:' then
    first_cause = rcall('HGET', base .. 'dagrun:' .. first, 'cause') or ''
  end
  return {2, first, now, first_cause}
end
if rcall('HGET', dag_key, 'status') == 'paused' then
  return hold_delivery(base, dag, cause, key, args, ARGV[7], ARGV[8], ARGV[6], 3)
end
local drid = dag_triggered(base, ready_key, dag_key, dag, cause, args, now)
rcall('SET', idem_key, drid, 'PX', ARGV[6])
return {1, drid, now, woken_queues()}
