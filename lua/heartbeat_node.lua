#!lua
--[[
  A node's heartbeat: extend its registration, drop nodes whose registration lapsed (by
  the server's clock), and answer who is alive.

  KEYS[1] nodes      ZSET node_id -> registration expiry (ms)   (global, tag {g})
  KEYS[2] node_info  HASH node_id -> JSON                        (global, tag {g})
  ARGV[1] node id
  ARGV[2] registration ttl (ms)
  ARGV[3] info JSON

  Returns {now_ms, node1, node2, ...}: the live nodes, sorted by id.
]]
local rcall = redis.call
local nodes_key, info_key = KEYS[1], KEYS[2]
local t = rcall('TIME')
local now = t[1] .. string.format('%03d', math.floor(t[2] / 1000))
local dead = rcall('ZRANGE', nodes_key, '-inf', '(' .. now, 'BYSCORE')
for _, node in ipairs(dead) do
  rcall('ZREM', nodes_key, node)
  rcall('HDEL', info_key, node)
end
rcall('ZADD', nodes_key, tonumber(now) + tonumber(ARGV[2]), ARGV[1])
rcall('HSET', info_key, ARGV[1], ARGV[3])
local live = rcall('ZRANGE', nodes_key, 0, -1)
table.sort(live)
local out = {now}
for _, node in ipairs(live) do
  out[#out + 1] = node
end
return out
