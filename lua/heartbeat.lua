#!lua flags=allow-oom
--[[
  A heartbeat into a registry (of nodes, or of workers): extend the caller's registration,
  drop members whose registration lapsed (by the server's clock), answer who is alive.

  KEYS[1] members    ZSET member id -> registration expiry (ms)   (global, tag {g})
  KEYS[2] info       HASH member id -> JSON                        (global, tag {g})
  ARGV[1] member id
  ARGV[2] registration ttl (ms)
  ARGV[3] info JSON
  ARGV[4] '1': answer the live members (nodes spread shards over them); '0': do not (a
          worker: a fleet of thousands must not cost each heartbeat the whole list)

  Returns {now_ms, member1, member2, ...}: the live members, sorted by id (only now_ms
  for ARGV[4] '0').

  allow-oom: runs while Redis is full (it adds no more than a few bytes), so leases and
  registrations hold and no owner or worker loses its work to a full Redis.
]]
local rcall = redis.call
-- @include clock
local nodes_key, info_key = KEYS[1], KEYS[2]
local now = server_now_ms()
local dead = rcall('ZRANGE', nodes_key, '-inf', '(' .. now, 'BYSCORE')
for _, node in ipairs(dead) do
  rcall('ZREM', nodes_key, node)
  rcall('HDEL', info_key, node)
end
rcall('ZADD', nodes_key, tonumber(now) + tonumber(ARGV[2]), ARGV[1])
rcall('HSET', info_key, ARGV[1], ARGV[3])
if ARGV[4] == '0' then
  return {now}
end
local live = rcall('ZRANGE', nodes_key, 0, -1)
table.sort(live)
local out = {now}
for _, node in ipairs(live) do
  out[#out + 1] = node
end
return out
