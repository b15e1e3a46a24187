-- A concurrency key's state (core/concurrency.py; store/keys.py ConcurrencyKeys), in its
-- own hash slot: KEYS[1..5] of every ck_* script are holders (ZSET run -> hold deadline
-- ms), reserved (SET), waiting (ZSET run -> ms * 1000 + arrival mod 1000), starts (ZSET
-- run -> ms) and state (HASH 'seq', 'jl'). The key's limits (HASH 'limit', 'rmax',
-- 'rper': <key base>lim) are the holders key's sibling, read here but not passed in KEYS:
-- a key in KEYS must be writable by the caller, and a worker may only read the limits.
-- A holder is a run executing, or a waiting run granted its turn and put back on its
-- ready stream (reserved) until a worker claims it. Callers define rcall.
local H, R, W, S, ST = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local LIM = string.sub(H, 1, -2) .. 'lim'  -- <key base>h -> <key base>lim
-- The most waiting runs one call grants (the owner's sweep grants the rest a second later).
local GRANT_MAX = 1000

-- The key's limits: runs at once (its own, else the one its jobs gave; nil: none), and
-- the rate's starts and interval in ms (nil: none).
local function key_limits()
  local lim = rcall('HMGET', LIM, 'limit', 'rmax', 'rper')
  local limit = tonumber(lim[1] or '') or tonumber(rcall('HGET', ST, 'jl') or '')
  return limit, tonumber(lim[2] or ''), tonumber(lim[3] or '')
end

-- Drop holders whose deadline passed (their worker stopped renewing: gone); reserved
-- ones are kept and returned, for the sweep to put back on their stream again.
local function drop_lapsed(now)
  local lapsed = rcall('ZRANGE', H, '-inf', '(' .. now, 'BYSCORE')
  local again = {}
  for _, rid in ipairs(lapsed) do
    if rcall('SISMEMBER', R, rid) == 1 then
      again[#again + 1] = rid
    else
      rcall('ZREM', H, rid)
    end
  end
  return again
end

-- How many more runs may start now (nil: no limit).
local function room(now, limit, rmax, rper)
  local n = nil
  if limit then
    n = limit - rcall('ZCARD', H)
  end
  if rmax and rper then
    rcall('ZREMRANGEBYSCORE', S, '-inf', now - rper)
    local r = rmax - rcall('ZCARD', S)
    if not n or r < n then
      n = r
    end
  end
  return n
end

-- `rid` holds the key until now + hold_ms; a start counts against the rate.
local function hold(rid, now, hold_ms, rmax, new_start)
  rcall('ZADD', H, now + hold_ms, rid)
  if new_start and rmax then
    rcall('ZADD', S, now, rid)
  end
end

-- Grant the waiting runs at the head their turn while there is room: each holds the key
-- (reserved, for reserve_ms) until its worker claims it. Returns the granted run ids and
-- the room left.
local function grant_heads(now, n, rmax, reserve_ms)
  local granted = {}
  while (not n or n > 0) and #granted < GRANT_MAX do
    local head = rcall('ZPOPMIN', W)
    if not head[1] then
      break
    end
    hold(head[1], now, reserve_ms, rmax, true)
    rcall('SADD', R, head[1])
    granted[#granted + 1] = head[1]
    if n then
      n = n - 1
    end
  end
  return granted, n
end
