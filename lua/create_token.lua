#!lua
--[[
  Create an API token: store its record under the SHA-256 of its secret, and its name.

  KEYS[1] tokens  HASH h:<sha256> -> JSON record, n:<name> -> sha256
  ARGV[1] token name (unique)
  ARGV[2] SHA-256 of the secret (hex)
  ARGV[3] the record, JSON, with "created_at":0 for the script to fill in

  Returns {1, now_ms}; {-1} when a token of that name exists.
]]
local rcall = redis.call
-- @include clock
local key, name, sha = KEYS[1], ARGV[1], ARGV[2]
if rcall('HEXISTS', key, 'n:' .. name) == 1 then
  return {-1}
end
local now = server_now_ms()
local record = string.gsub(ARGV[3], '"created_at":0', '"created_at":' .. now, 1)
rcall('HSET', key, 'h:' .. sha, record, 'n:' .. name, sha)
return {1, now}
