#!lua
--[[
  An operator sets (or clears) a concurrency key's own limits, in effect at the next
  start: a raised limit grants the waiting runs at the head at once; a lowered one lets
  the runs holding the key finish and starts no more until they are under it. The change
  is recorded in the key's change log.

  KEYS[1] holders   ZSET run id -> hold deadline (ms)
  KEYS[2] reserved  SET runs granted while waiting, not yet claimed
  KEYS[3] waiting   ZSET run id -> ms * 1000 + arrival (mod 1000): in order
  KEYS[4] starts    ZSET run id -> ms: starts within the rate's interval
  KEYS[5] state     HASH 'seq' arrivals, 'jl' the limit the key's jobs gave
  The key's limits (<key base>lim, lib/holds.lua) are set here.
  KEYS[6] changes  LIST (capped, newest first) "<ms>|<JSON>" (core/concurrency.py
                   LimitChange; the ms, the server's, is its time)
  ARGV[1] runs at once ('' none)
  ARGV[2] rate: starts per interval ('' none)
  ARGV[3] rate: the interval (ms; '' none)
  ARGV[4] the change, as JSON
  ARGV[5] how long a granted waiting run holds the key before it is claimed (ms)

  Returns {now ms, then the waiting runs granted (the caller puts them back on their
  ready streams: lua/unpark_runs.lua)}.
]]
local rcall = redis.call
-- @include clock
-- @include holds
local CHANGES_KEPT = 100
local now = tonumber(server_now_ms())
rcall('DEL', LIM)
if ARGV[1] ~= '' then
  rcall('HSET', LIM, 'limit', ARGV[1])
end
if ARGV[2] ~= '' then
  rcall('HSET', LIM, 'rmax', ARGV[2], 'rper', ARGV[3])
end
rcall('LPUSH', KEYS[6], string.format('%d', now) .. '|' .. ARGV[4])
rcall('LTRIM', KEYS[6], 0, CHANGES_KEPT - 1)
local limit, rmax, rper = key_limits()
local granted = grant_heads(now, room(now, limit, rmax, rper), rmax, tonumber(ARGV[5]))
local out = {now}
for _, rid in ipairs(granted) do
  out[#out + 1] = rid
end
return out
