#!lua flags=allow-oom
--[[
  Extend a shard lease, only for the node and epoch that hold it.

  KEYS[1] owner   STRING node id with PX expiry
  KEYS[2] epoch   STRING integer fencing token
  KEYS[3] stats   HASH shard counters (refused_renew counts refusals)
  ARGV[1] node id
  ARGV[2] epoch the caller holds
  ARGV[3] lease ttl (ms)

  Returns 1, or -1 when the lease is lost (expired, taken, or a newer epoch exists).

  allow-oom: runs while Redis is full (it adds no more than a few bytes), so leases and
  registrations hold and no owner or worker loses its work to a full Redis.
]]
local rcall = redis.call
if rcall('GET', KEYS[1]) ~= ARGV[1] or rcall('GET', KEYS[2]) ~= ARGV[2] then
  rcall('HINCRBY', KEYS[3], 'refused_renew', 1)
  return -1
end
rcall('PEXPIRE', KEYS[1], ARGV[3])
return 1
