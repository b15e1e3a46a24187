#!lua
--[[
  An event received, stored before it is acknowledged, with no outcome yet: its owner
  delivers it if the caller does not (store/event_delivery.py).

  KEYS[1] event    HASH the event (evt:<id>)
  KEYS[2] pending  ZSET event_id -> received (ms): events with no outcome yet
  KEYS[3] log      ZSET event_id -> received (ms): the shard's events
  ARGV[1] event id
  ARGV[2] its name
  ARGV[3] its source: 'api:<token name>' or 'hook:<hook name>'
  ARGV[4] its idempotency key ('' none)
  ARGV[5] its payload (JSON)
  ARGV[6] a signed hook's timestamp (seconds; '' none): refused unless within ARGV[7] of
          the server's clock, either way
  ARGV[7] that window (ms)

  Returns {1, now_ms} stored; {-1, now_ms} the timestamp is outside the window (nothing
  written); {-2, now_ms} an event with this id exists (nothing written).
]]
local rcall = redis.call
-- @include clock
local event_key, pending_key, log_key = KEYS[1], KEYS[2], KEYS[3]
local now = server_now_ms()
if ARGV[6] ~= '' then
  local signed = tonumber(ARGV[6]) * 1000
  if math.abs(now - signed) > tonumber(ARGV[7]) then
    return {-1, now}
  end
end
if rcall('EXISTS', event_key) == 1 then
  return {-2, now}
end
rcall('HSET', event_key, 'n', ARGV[2], 'src', ARGV[3], 'k', ARGV[4], 'p', ARGV[5], 'at', now)
rcall('ZADD', pending_key, now, ARGV[1])
rcall('ZADD', log_key, now, ARGV[1])
return {1, now}
