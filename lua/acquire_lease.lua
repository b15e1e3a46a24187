#!lua flags=allow-oom
--[[
  Take (or re-take) ownership of a shard and bump its fencing epoch.

  KEYS[1] owner   STRING node id with PX expiry
  KEYS[2] epoch   STRING integer fencing token
  ARGV[1] node id
  ARGV[2] lease ttl (ms)
  ARGV[3] the live nodes as the caller just read the registry (csv): a lease held by a
          node that is not among them is taken at once, not after its TTL (the holder
          stopped heartbeating: dead, stopped or cut off; the new epoch fences whatever
          it may still send, so taking it early is safe)

  Returns {epoch} on success, or {-1, holder, pttl} when another live node holds it.
  A node re-taking its own lease (a restart with the same --node-id) still gets a new
  epoch, so anything the previous incarnation still has in flight is fenced off.

  allow-oom: runs while Redis is full (it adds no more than a few bytes), so leases and
  registrations hold and no owner or worker loses its work to a full Redis.
]]
local rcall = redis.call
local owner_key, epoch_key = KEYS[1], KEYS[2]
local holder = rcall('GET', owner_key)
if holder and holder ~= ARGV[1] then
  local live = ARGV[3] == nil  -- no registry read given: every holder counts as live
  for node in string.gmatch(ARGV[3] or '', '[^,]+') do
    if node == holder then
      live = true
      break
    end
  end
  if live then
    return {-1, holder, rcall('PTTL', owner_key)}
  end
end
rcall('SET', owner_key, ARGV[1], 'PX', ARGV[2])
return {rcall('INCR', epoch_key)}
