#!lua
--[[
  Create an API token: store its record under the SHA-256 of its secret, and its name,
  and record who made it in the token log.

  KEYS[1] tokens    HASH h:<sha256> -> JSON record, n:<name> -> sha256
  KEYS[2] tokenlog  STREAM who made or revoked which token, when (capped)
  ARGV[1] token name (unique)
  ARGV[2] SHA-256 of the secret (hex)
  ARGV[3] the record, JSON, with "created_at":0 for the script to fill in
  ARGV[4] who makes it (a token's name, 'shardsched dev', the CLI's straight-to-Redis)
  ARGV[5] what it may do, for the log ("admin,worker" and its name prefixes)

  Returns {1, now_ms}; {-1} when a token of that name exists.
]]
local rcall = redis.call
-- @include clock
-- @include tokenlog
local key, log_key, name, sha = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if rcall('HEXISTS', key, 'n:' .. name) == 1 then
  return {-1}
end
local now = server_now_ms()
local record = string.gsub(ARGV[3], '"created_at":0', '"created_at":' .. now, 1)
rcall('HSET', key, 'h:' .. sha, record, 'n:' .. name, sha)
log_token(log_key, 'created', ARGV[4], name, ARGV[5])
return {1, now}
