#!lua flags=allow-oom
--[[
  A worker renews the holds of runs it executes, with their leases (worker/limits.py).

  KEYS[1] holders  ZSET run id -> hold deadline (ms)
  ARGV[1..] items of 2: run id, hold (ms from now)

  Returns a code per item: 1 renewed; 0 the run no longer holds the key (its hold lapsed
  and was dropped: the worker stops it, as for a lost lease).
  allow-oom: a hold must not lapse because Redis is full.
]]
local rcall = redis.call
-- @include clock
local now = tonumber(server_now_ms())
local out = {}
for i = 1, #ARGV, 2 do
  if rcall('ZSCORE', KEYS[1], ARGV[i]) then
    rcall('ZADD', KEYS[1], now + tonumber(ARGV[i + 1]), ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
