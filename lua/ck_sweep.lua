#!lua flags=allow-oom
--[[
  The owner's look at one concurrency key (shard/limits.py), each second while runs wait
  on it: holders whose worker stopped renewing are dropped; a granted run not claimed in
  time is kept and returned to be put back on its stream again (its put-back may have
  been lost with the caller); the waiting runs at the head get the room there is (a rate
  limit's interval passing frees room with no run ending).

  KEYS[1] holders   ZSET run id -> hold deadline (ms)
  KEYS[2] reserved  SET runs granted while waiting, not yet claimed
  KEYS[3] waiting   ZSET run id -> ms * 1000 + arrival (mod 1000): in order
  KEYS[4] starts    ZSET run id -> ms: starts within the rate's interval
  KEYS[5] state     HASH 'seq' arrivals, 'jl' the limit the key's jobs gave
  ARGV[1] how long a granted waiting run holds the key before it is claimed (ms)

  Returns {now ms, waiting, holding, since when the oldest waiting run waits (ms; ''
  none), granted count, the granted run ids, then the granted runs not claimed in time}.
  allow-oom: it frees slots a full Redis would otherwise keep.
]]
local rcall = redis.call
-- @include clock
-- @include holds
local now = tonumber(server_now_ms())
local reserve_ms = tonumber(ARGV[1])
local again = drop_lapsed(now)
for _, rid in ipairs(again) do
  rcall('ZADD', H, now + reserve_ms, rid)
end
local limit, rmax, rper = key_limits()
local granted = grant_heads(now, room(now, limit, rmax, rper), rmax, reserve_ms)
local head = rcall('ZRANGE', W, 0, 0, 'WITHSCORES')
local oldest = head[2] and math.floor(tonumber(head[2]) / 1000) or ''
local out = {now, rcall('ZCARD', W), rcall('ZCARD', H), oldest, #granted}
for _, rid in ipairs(granted) do
  out[#out + 1] = rid
end
for _, rid in ipairs(again) do
  out[#out + 1] = rid
end
return out
