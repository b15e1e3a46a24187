#!lua flags=allow-oom
--[[
  Revoke an API token: its next request, on any router, is refused. Found by its name
  (n:<name>), by its hash when ARGV[1] is one (64 hex digits), and by the name inside
  every record, so a token written straight into Redis without its name entry can still
  be revoked. Records who revoked it in the token log.

  KEYS[1] tokens    HASH h:<sha256> -> JSON record, n:<name> -> sha256
  KEYS[2] tokenlog  STREAM who made or revoked which token, when (capped)
  ARGV[1] token name, or the SHA-256 of its secret (hex)
  ARGV[2] who revokes it

  Returns how many records were removed: 0 when none matched.

  allow-oom: it only deletes (and logs a few bytes), and revoking a leaked token must work
  on a full Redis.
]]
local rcall = redis.call
-- @include tokenlog
local key, log_key, which = KEYS[1], KEYS[2], ARGV[1]
local doomed = {}
local sha = rcall('HGET', key, 'n:' .. which)
if sha then
  doomed['h:' .. sha] = which
end
if string.match(which, '^%x+$') and #which == 64 and rcall('HEXISTS', key, 'h:' .. which) == 1 then
  doomed['h:' .. which] = 'sha256:' .. string.sub(which, 1, 12)
end
local all = rcall('HGETALL', key)
for i = 1, #all, 2 do
  local field = all[i]
  if string.sub(field, 1, 2) == 'h:' and not doomed[field] then
    local ok, record = pcall(cjson.decode, all[i + 1])
    if ok and type(record) == 'table' and record.name == which then
      doomed[field] = which
    end
  end
end
local removed = 0
for field, name in pairs(doomed) do
  local record = rcall('HGET', key, field)
  local ok, decoded = pcall(cjson.decode, record or '')
  local real = (ok and type(decoded) == 'table' and decoded.name) or name
  rcall('HDEL', key, field)
  if rcall('HGET', key, 'n:' .. real) == string.sub(field, 3) then
    rcall('HDEL', key, 'n:' .. real)
  end
  log_token(log_key, 'revoked', ARGV[2], real, 'by ' .. (which == real and 'name' or 'hash'))
  removed = removed + 1
end
if sha and removed == 0 then
  rcall('HDEL', key, 'n:' .. which)  -- a name left without its record
end
return removed
