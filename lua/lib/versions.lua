-- A job's definition history: before a change bumps the job's version, the definition it
-- had is kept in vers:<job> (HASH version -> "status|from_ms|by|spec JSON", where by is
-- who made that version; entries kept before it was recorded read "status|from_ms|spec"),
-- so GET /jobs/{id}/versions shows every version, when it took effect and who made it.
-- Callers define rcall.
local function keep_version(job_key, versions_key)
  local cur = rcall('HMGET', job_key, 'version', 'status', 'updated', 'spec', 'by')
  if cur[1] then
    rcall('HSET', versions_key, cur[1], (cur[2] or '') .. '|' .. (cur[3] or '') .. '|' ..
      (cur[5] or '') .. '|' .. (cur[4] or ''))
  end
end
