-- Quarantine a job: pause it with the reason recorded ('quarantined: <reason>', at most
-- 400 bytes kept), closing its schedule segment at the timer's score as a pause does, so
-- it is neither fired blindly nor silently dropped. Resuming it (PATCH status active)
-- re-plans it from now. The job's own event (its id, active>quarantined, the reason) goes
-- on the shard's event stream, where notifications hear of it. Callers check it is active
-- with that timer score first, include clock, events, segments and versions, and define
-- rcall.
-- @include events
-- @include segments
-- @include versions
local function quarantine_job(job_key, timer_key, segs_key, versions_key, job, score, reason,
                              now)
  materialize_segments(job_key, segs_key)
  rcall('RPUSH', segs_key, 'c|' .. score .. '|' .. now)
  keep_version(job_key, versions_key)
  rcall('HSET', job_key, 'status', 'paused', 'updated', now, 'pa', now, 'pu', '',
    'pr', 'quarantined: ' .. string.sub(reason, 1, 400))
  rcall('HINCRBY', job_key, 'version', 1)
  rcall('ZREM', timer_key, job)
  emit_event(string.sub(job_key, 1, #job_key - #job - 4), job, 'active', 'quarantined', '',
    string.sub(reason, 1, 400))
end
