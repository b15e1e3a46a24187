-- A job's definition history: before a change bumps the job's version, the definition it
-- had is kept in vers:<job> (HASH version -> "status|from_ms|spec JSON"), so
-- GET /jobs/{id}/versions shows every version and the time it took effect. Callers
-- define rcall.
local function keep_version(job_key, versions_key)
  local cur = rcall('HMGET', job_key, 'version', 'status', 'updated', 'spec')
  if cur[1] then
    rcall('HSET', versions_key, cur[1], (cur[2] or '') .. '|' .. (cur[3] or '') .. '|' ..
      (cur[4] or ''))
  end
end
