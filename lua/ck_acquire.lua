#!lua
--[[
  A worker asks to start claimed runs sharing one concurrency key (core/concurrency.py):
  each is granted the key while fewer than its limit hold it (and the rate allows a
  start), else it waits, in the order it came. Runs already waiting come first: while any
  wait, a newcomer waits behind them, and the room there is goes to the heads (granted
  and returned, for the caller to put back on their streams: lua/unpark_runs.lua).
  A run that already holds the key (a waiting run granted its turn, or a delivery again)
  is granted at once and is no new start.

  KEYS[1] holders   ZSET run id -> hold deadline (ms)
  KEYS[2] reserved  SET runs granted while waiting, not yet claimed
  KEYS[3] waiting   ZSET run id -> ms * 1000 + arrival (mod 1000): in order
  KEYS[4] starts    ZSET run id -> ms: starts within the rate's interval
  KEYS[5] state     HASH 'seq' arrivals, 'jl' the limit the key's jobs gave
  The key's own limits are read from its 'lim' hash (lib/holds.lua).
  ARGV[1] how long a granted waiting run holds the key before it is claimed (ms)
  ARGV[2..] items of 3: run id, hold (ms: its lease; renewed with it, lua/ck_renew.lua),
          the limit its job gives (0: none)

  Returns {now ms, a code per item (1 granted, 0 waiting), then the waiting runs granted
  here}.
]]
local rcall = redis.call
-- @include clock
-- @include holds
local now = tonumber(server_now_ms())
local reserve_ms = tonumber(ARGV[1])
local job_limit = nil
for i = 2, #ARGV, 3 do
  if ARGV[i + 2] ~= '0' then
    job_limit = ARGV[i + 2]
  end
end
if job_limit and rcall('HGET', ST, 'jl') ~= job_limit then
  rcall('HSET', ST, 'jl', job_limit)
end
drop_lapsed(now)
local limit, rmax, rper = key_limits()
local n = room(now, limit, rmax, rper)
local granted
granted, n = grant_heads(now, n, rmax, reserve_ms)
local out = {now}
local asked = {}
for i = 2, #ARGV, 3 do
  local rid, hold_ms = ARGV[i], tonumber(ARGV[i + 1])
  asked[rid] = true
  if rcall('ZSCORE', H, rid) then
    rcall('SREM', R, rid)
    hold(rid, now, hold_ms, rmax, false)
    out[#out + 1] = 1
  elseif (not n or n > 0) and rcall('ZCARD', W) == 0 then
    hold(rid, now, hold_ms, rmax, true)
    if n then
      n = n - 1
    end
    out[#out + 1] = 1
  else
    if not rcall('ZSCORE', W, rid) then
      local seq = rcall('HINCRBY', ST, 'seq', 1)
      rcall('ZADD', W, now * 1000 + seq % 1000, rid)
    end
    out[#out + 1] = 0
  end
end
for _, rid in ipairs(granted) do
  if not asked[rid] then  -- one of these runs: started here, nothing to put back
    out[#out + 1] = rid
  end
end
return out
