#!lua
--[[
  The dispatcher made one message of a group of matches: keep it, due now, and take its
  matches off the outbox, in one step (a dispatcher that dies before it leaves the matches
  pending, and the next one groups them again into a message of the same id, kept once).

  KEYS[1] outbox  STREAM matches (consumer group ARGV[1])
  KEYS[2] msgs    ZSET message id -> when it was made (ms): the delivery record
  KEYS[3] due     ZSET message id -> when its next delivery attempt is due (ms)
  ARGV[1] consumer group
  ARGV[2] key base ("<ns>:{g}:"): ntfmsg:<id> (HASH the message) is built from it, in
          KEYS' hash slot
  ARGV[3] message id
  ARGV[4] channel
  ARGV[5] rule id
  ARGV[6] body (JSON)
  ARGV[7..] outbox entry ids of its matches

  Returns 1 when the message is new, 0 when it was kept before.
]]
local rcall = redis.call
local base = ARGV[2]
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = base .. 'ntfmsg:' .. ARGV[3]
local made = 0
if rcall('EXISTS', key) == 0 then
  rcall('HSET', key, 'ch', ARGV[4], 'rule', ARGV[5], 'body', ARGV[6], 'st', 'pending',
    'c', now, 'n', 0)
  rcall('ZADD', KEYS[2], now, ARGV[3])
  rcall('ZADD', KEYS[3], now, ARGV[3])
  made = 1
end
if #ARGV >= 7 then
  rcall('XACK', KEYS[1], ARGV[1], unpack(ARGV, 7))
  rcall('XDEL', KEYS[1], unpack(ARGV, 7))
end
return made
