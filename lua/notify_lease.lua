#!lua flags=allow-oom
--[[
  Take or keep the deployment's notification dispatcher lease: one node groups, rate
  limits and delivers (shard/dispatcher.py).

  KEYS[1] lease  STRING the holder's node id, with PX expiry
  ARGV[1] node id
  ARGV[2] lease TTL (ms)

  Returns 1 when the caller holds it now, else 0.
]]
local rcall = redis.call
local holder = rcall('GET', KEYS[1])
if holder == ARGV[1] then
  rcall('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  rcall('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
