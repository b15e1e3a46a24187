#!lua
--[[
  Record one delivery attempt of a message: delivered, failed for good, or to retry.

  KEYS[1] due  ZSET message id -> when its next attempt is due (ms)
  ARGV[1] key base ("<ns>:{g}:"): ntfmsg:<id> (HASH the message) and ntfatt:<id> (LIST
          its attempts, newest last, the last 50) are built from it, in KEYS' hash slot
  ARGV[2] message id
  ARGV[3] outcome: delivered | retry | failed
  ARGV[4] what the channel answered (an HTTP status, an error)
  ARGV[5] how long the attempt took (ms)
  ARGV[6] when to try again (ms, server clock; retry only)

  Returns the attempts made so far; 0 when the message is gone (trimmed).
]]
local rcall = redis.call
local base = ARGV[1]
local key = base .. 'ntfmsg:' .. ARGV[2]
if rcall('EXISTS', key) == 0 then
  rcall('ZREM', KEYS[1], ARGV[2])
  return 0
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = rcall('HINCRBY', key, 'n', 1)
local st = ARGV[3] == 'retry' and 'retrying' or ARGV[3]
rcall('HSET', key, 'st', st, 'last', now, 'le', ARGV[4])
local att = base .. 'ntfatt:' .. ARGV[2]
rcall('RPUSH', att, now .. '|' .. ARGV[3] .. '|' .. ARGV[5] .. '|' .. ARGV[4])
rcall('LTRIM', att, -50, -1)
if ARGV[3] == 'retry' then
  rcall('ZADD', KEYS[1], ARGV[6], ARGV[2])
  rcall('HSET', key, 'next', ARGV[6])
else
  rcall('ZREM', KEYS[1], ARGV[2])
  rcall('HDEL', key, 'next')
end
return n
