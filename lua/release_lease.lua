#!lua
--[[
  Give a shard lease up at once so the next owner need not wait for the TTL.

  KEYS[1] owner   STRING node id with PX expiry
  KEYS[2] epoch   STRING integer fencing token
  ARGV[1] node id
  ARGV[2] epoch the caller holds

  Returns 1 when released, 0 when the caller no longer held it.
]]
local rcall = redis.call
if rcall('GET', KEYS[1]) ~= ARGV[1] or rcall('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
rcall('DEL', KEYS[1])
return 1
