#!lua flags=allow-oom
--[[
  Revoke an API token by name: its next request, on any router, is refused.

  KEYS[1] tokens  HASH h:<sha256> -> JSON record, n:<name> -> sha256
  ARGV[1] token name

  Returns 1 when revoked, 0 when no token has that name.

  allow-oom: it only deletes, and revoking a leaked token must work on a full Redis.
]]
local rcall = redis.call
local key, name = KEYS[1], ARGV[1]
local sha = rcall('HGET', key, 'n:' .. name)
if not sha then
  return 0
end
rcall('HDEL', key, 'n:' .. name, 'h:' .. sha)
return 1
