#!lua
--[[
  Quarantine a job the shard owner cannot plan (its next fire time or its catch-up decision
  raised): pause it with the reason recorded, so it is neither fired blindly nor silently
  dropped. Fenced by the owner's epoch; applied only if the job is still active with the
  timer entry the owner planned from (a PATCH meanwhile gets planned afresh instead).

  The schedule segment closes at the timer's score, as for a pause: the audit expects no
  tick after it, and reports the job as quarantined (its pause reason starts with
  'quarantined:'). Resuming the job (PATCH status active) re-plans it from now.

  KEYS[1] job       HASH the job
  KEYS[2] timer     ZSET job_id -> next fire (ms)
  KEYS[3] segs      LIST the job's schedule segments
  KEYS[4] versions  HASH the job's earlier definitions (lib/versions.lua)
  KEYS[5] epoch     STRING the shard's fencing epoch
  KEYS[6] stats     HASH shard counters ('quarantined' counts quarantines)
  ARGV[1] epoch the owner holds
  ARGV[2] job id
  ARGV[3] the timer score the owner planned from (ms)
  ARGV[4] reason (recorded as 'quarantined: <reason>', at most 400 bytes kept)

  The job's event (active>quarantined) goes to the events STREAM built from the job key's
  shard key base (lib/events.lua).

  Returns 1 quarantined; 0 the job changed meanwhile (nothing written); -1 epoch superseded.
]]
local rcall = redis.call
-- @include clock
local job_key, timer_key, segs_key, versions_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local epoch_key, stats_key = KEYS[5], KEYS[6]

-- @include quarantine

if rcall('GET', epoch_key) ~= ARGV[1] then
  return -1
end
local job = ARGV[2]
local score = rcall('ZSCORE', timer_key, job)
if rcall('HGET', job_key, 'status') ~= 'active' or not score
    or tonumber(score) ~= tonumber(ARGV[3]) then
  return 0
end
quarantine_job(job_key, timer_key, segs_key, versions_key, job, score, ARGV[4],
  server_now_ms())
rcall('HINCRBY', stats_key, 'quarantined', 1)
return 1
