#!lua
--[[
  An event delivered to one job that listens to it, or an upstream's outcome to a job that
  runs after it (core/events.py, store/event_delivery, shard/event_chores): a run of the
  job now, unless the delivery's key came to the job before (then the earlier run, or
  the earlier delivery still held), or the job is paused (then held, kept latest or
  dropped as its rule says).

  KEYS[1] job     HASH the job
  KEYS[2] ready   STREAM of fired runs
  ARGV[1] shard key base; run:<id>, runs:<job>, args:<job>:t<n>, idem:<job>:<key>,
          evheld:<job> (LIST of held deliveries) and evheldjobs (SET of jobs holding any)
          are built from it (same hash slot)
  ARGV[2] job id
  ARGV[3] the run's cause: 'event:<event id>' or 'after:<upstream run id>'
  ARGV[4] the run's args JSON ('': the job's own)
  ARGV[5] the delivery's key: 'event:<name>:<idempotency key or event id>', or
          'after:...' (store/event_delivery.py)
  ARGV[6] how long a key is remembered (ms)
  ARGV[7] when the job is paused: hold | keep_latest | drop
  ARGV[8] deliveries held at most (hold: a delivery beyond is dropped)
  ARGV[9] the job's backlog code ('' none; core/backlog.py): while its runs are queued
          past that bound, a delivery is held as for a paused job (the code kept on the
          job as 'blc' for lua/release_held.lua, which releases them as the queue drains)

  Returns {1, run_id, now_ms, queues} a run made (queues: lib/queues.lua); {2, first,
  now_ms, cause} the key was delivered before (first: that run's id, or 'held:<cause>'
  while that delivery is held; cause: the first run's); {3, held, superseded...} held (held:
  how many the job holds now; superseded: the causes keep_latest replaced); {4, why}
  dropped ('paused' by the rule drop, 'full' past the bound); {5, ...} as 3, held because
  the job's runs are queued past its backlog bound; {-1} no such job; {-2} deleted.
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include events
-- @include queues
-- @include live
-- @include triggered
-- @include backlog
-- @include deliveries
local job_key = KEYS[1]
local base, job, cause, args, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local status, refused = live_status(job_key)
if refused then
  return refused
end
local now = server_now_ms()
local idem_key = base .. 'idem:' .. job .. ':' .. key
local first = rcall('GET', idem_key)
if first then
  local first_cause = ''
  if string.sub(first, 1, 5) ~= 'held:' then
    first_cause = rcall('HGET', base .. 'run:' .. first, 'cause') or ''
  end
  return {2, first, now, first_cause}
end
local behind = false
if status ~= 'paused' and (ARGV[9] or '') ~= '' then
  local count, age = backlog_bounds(ARGV[9])
  behind = count ~= nil and backlogged(base, job, count, age, tonumber(now)) ~= nil
  if behind then
    rcall('HSET', job_key, 'blc', ARGV[9])
  end
end
if status == 'paused' or behind then
  return hold_delivery(base, job, cause, key, args, ARGV[7], ARGV[8], ARGV[6], behind and 5 or 3)
end
local detail = string.match(cause, '^[a-z]+')  -- event, after: the scheduled event's
local rid = make_triggered_run(base, job_key, job, args, now, cause, detail)
rcall('SET', idem_key, rid, 'PX', ARGV[6])
return {1, rid, now, woken_queues()}
