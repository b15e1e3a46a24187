#!lua
--[[
  Manual trigger: create a run of a job now, bypassing its schedule.

  KEYS[1] job     HASH the job
  KEYS[2] ready   STREAM of fired runs
  ARGV[1] shard key base; run:<id> and runs:<job> are built from it (same hash slot)
  ARGV[2] job id
  ARGV[3] who triggers it (its log of runs by hand, acts:<job> from the base, gets a
          'trigger')

  Returns {1, run_id, now_ms}; {-1} when the job does not exist; {-2} when it is deleted.
  Run ids are <job>:t<n>:1 with n the job's trigger count, so two triggers in the same
  millisecond are two runs.
  Each change of a run's state it makes appends to events (lib/events.lua).
]]
local rcall = redis.call
-- @include clock
-- @include events
-- @include changes
-- @include live
local job_key, ready_key = KEYS[1], KEYS[2]
local base, job = ARGV[1], ARGV[2]
local status, refused = live_status(job_key)
if refused then
  return refused
end
local now = server_now_ms()
local n = rcall('HINCRBY', job_key, 'triggers', 1)
local rid = job .. ':t' .. n .. ':1'
rcall('HSET', base .. 'run:' .. rid, 's', now, 'st', 'scheduled', 'c', now)
rcall('ZADD', base .. 'runs:' .. job, now, rid)
rcall('XADD', ready_key, '*', 'r', rid)
log_change(base .. 'acts:' .. job, 'trigger', ARGV[3], '', rid)
emit_event(base, rid, '', 'scheduled', '', 'manual')
return {1, rid, now}
