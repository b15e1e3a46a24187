#!lua flags=allow-oom
--[[
  Runs of one concurrency key ended (or will not run): they stop holding the key, or
  waiting on it, and the waiting runs at the head get their turn while there is room.

  KEYS[1] holders   ZSET run id -> hold deadline (ms)
  KEYS[2] reserved  SET runs granted while waiting, not yet claimed
  KEYS[3] waiting   ZSET run id -> ms * 1000 + arrival (mod 1000): in order
  KEYS[4] starts    ZSET run id -> ms: starts within the rate's interval
  KEYS[5] state     HASH 'seq' arrivals, 'jl' the limit the key's jobs gave
  ARGV[1] how long a granted waiting run holds the key before it is claimed (ms)
  ARGV[2..] run ids

  Returns the waiting runs granted (the caller puts them back on their ready streams:
  lua/unpark_runs.lua).
  allow-oom: it frees what a full Redis holds; a slot must free even then.
]]
local rcall = redis.call
-- @include clock
-- @include holds
local now = tonumber(server_now_ms())
for i = 2, #ARGV do
  rcall('ZREM', H, ARGV[i])
  rcall('SREM', R, ARGV[i])
  rcall('ZREM', W, ARGV[i])
end
drop_lapsed(now)
local limit, rmax, rper = key_limits()
local granted = grant_heads(now, room(now, limit, rmax, rper), rmax, tonumber(ARGV[1]))
return granted
