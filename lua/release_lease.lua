#!lua flags=allow-oom
--[[
  Give a shard lease up at once so the next owner need not wait for the TTL.

  KEYS[1] owner   STRING node id with PX expiry
  KEYS[2] epoch   STRING integer fencing token
  ARGV[1] node id
  ARGV[2] epoch the caller holds

  Returns 1 when released, 0 when the caller no longer held it.

  allow-oom: runs while Redis is full (it adds no more than a few bytes), so leases and
  registrations hold and no owner or worker loses its work to a full Redis.
]]
local rcall = redis.call
if rcall('GET', KEYS[1]) ~= ARGV[1] or rcall('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
rcall('DEL', KEYS[1])
return 1
