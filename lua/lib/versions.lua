-- A job's definition history: before a change bumps the job's version, the definition it
-- had is kept in vers:<job> (HASH version -> "status|from_ms|by|spec JSON", where by is
-- who made that version; entries kept before it was recorded read "status|from_ms|spec"),
-- so GET /jobs/{id}/versions shows every version, when it took effect and who made it.
-- Only the VERSIONS_KEPT most recent earlier versions are kept (and the current one, in
-- the job's hash): a job patched every minute must not grow without end. The change log
-- (lib/changes.lua) still says who changed what, for every change. Callers define rcall.
local VERSIONS_KEPT = 100
local function keep_version(job_key, versions_key)
  local cur = rcall('HMGET', job_key, 'version', 'status', 'updated', 'spec', 'by')
  if cur[1] then
    rcall('HSET', versions_key, cur[1], (cur[2] or '') .. '|' .. (cur[3] or '') .. '|' ..
      (cur[5] or '') .. '|' .. (cur[4] or ''))
    local oldest = tonumber(cur[1]) - VERSIONS_KEPT
    if oldest >= 1 then
      rcall('HDEL', versions_key, oldest)
    end
  end
end
