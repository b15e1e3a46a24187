#!lua flags=allow-oom
--[[
  Take (or re-take) ownership of a shard and bump its fencing epoch.

  KEYS[1] owner   STRING node id with PX expiry
  KEYS[2] epoch   STRING integer fencing token
  ARGV[1] node id
  ARGV[2] lease ttl (ms)

  Returns {epoch} on success, or {-1, holder, pttl} when another node holds the lease.
  A node re-taking its own lease (a restart with the same --node-id) still gets a new
  epoch, so anything the previous incarnation still has in flight is fenced off.

  allow-oom: runs while Redis is full (it adds no more than a few bytes), so leases and
  registrations hold and no owner or worker loses its work to a full Redis.
]]
local rcall = redis.call
local owner_key, epoch_key = KEYS[1], KEYS[2]
local holder = rcall('GET', owner_key)
if holder and holder ~= ARGV[1] then
  return {-1, holder, rcall('PTTL', owner_key)}
end
rcall('SET', owner_key, ARGV[1], 'PX', ARGV[2])
return {rcall('INCR', epoch_key)}
