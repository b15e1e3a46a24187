#!lua
--[[
  Manual trigger: create a run of a job now, bypassing its schedule.

  KEYS[1] job     HASH the job
  KEYS[2] ready   STREAM of fired runs
  ARGV[1] shard key base; run:<id>, runs:<job>, args:<job>:<tick> and idem:<job>:<key> are built from it
          (same hash slot)
  ARGV[2] job id
  ARGV[3] who triggers it (its log of runs by hand, acts:<job> from the base, gets a
          'trigger')
  ARGV[4] the run's args JSON, instead of the job's ('': the job's own)
  ARGV[5] an idempotency key ('': none): a trigger with a key used on this job within
          ARGV[6] ms makes no run and answers the first one's id
  ARGV[6] how long a key is remembered (ms)

  The run goes to the job's queue (lib/queues.lua).

  Returns {1, run_id, now_ms, queues}, or {2, run_id, now_ms} when the key was used before
  (run_id: that trigger's run); queues: '' for the default queue, else the job's queue
  (the caller wakes a worker of it); {-1} when the job does not exist; {-2} when it is
  deleted. Run ids are <job>:t<n>:1 with n the job's trigger count, so two triggers in
  the same millisecond are two runs.
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include events
-- @include queues
-- @include changes
-- @include live
-- @include triggered
local job_key, ready_key = KEYS[1], KEYS[2]
local base, job, args, key = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
local status, refused = live_status(job_key)
if refused then
  return refused
end
local now = server_now_ms()
local idem_key = key ~= '' and (base .. 'idem:' .. job .. ':' .. key)
if idem_key then
  local first = rcall('GET', idem_key)
  if first then
    return {2, first, now}
  end
end
local rid = make_triggered_run(base, job_key, job, args, now, '', 'manual')
if idem_key then
  rcall('SET', idem_key, rid, 'PX', ARGV[6])
end
log_change(base .. 'acts:' .. job, 'trigger', ARGV[3], '', rid)
return {1, rid, now, woken_queues()}
