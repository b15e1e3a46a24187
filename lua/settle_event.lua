#!lua
--[[
  An event's one outcome recorded: the first settle of an event wins, a later one (its
  owner and the receiver both delivering it) changes nothing and reads the first.

  KEYS[1] event    HASH the event (evt:<id>)
  KEYS[2] pending  ZSET events with no outcome yet
  ARGV[1] event id
  ARGV[2] the outcome (JSON, core/events.EventOutcome)
  ARGV[3] how long the event is kept once settled (ms)

  Returns {1, outcome} recorded now; {2, outcome} recorded before (that one); {-1} no
  such event.
]]
local rcall = redis.call
local event_key, pending_key = KEYS[1], KEYS[2]
if rcall('EXISTS', event_key) == 0 then
  rcall('ZREM', pending_key, ARGV[1])
  return {-1}
end
rcall('ZREM', pending_key, ARGV[1])
if rcall('HSETNX', event_key, 'o', ARGV[2]) == 0 then
  return {2, rcall('HGET', event_key, 'o')}
end
rcall('PEXPIRE', event_key, ARGV[3])
return {1, ARGV[2]}
