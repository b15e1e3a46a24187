#!lua
--[[
  What became later of an event held for a paused job (lua/release_held.lua): released as
  a run, or dropped. Its outcome ('held') stays; this is told beside it.

  KEYS[1] event    HASH the event (evt:<id>)
  ARGV[1] job id
  ARGV[2] the run made ('' none: dropped)
  ARGV[3] why dropped ('' when released)

  Returns 1 noted; 0 no such event (expired).
]]
local rcall = redis.call
if rcall('EXISTS', KEYS[1]) == 0 then
  return 0
end
rcall('HSET', KEYS[1], 'later:' .. ARGV[1], ARGV[2] ~= '' and ('run:' .. ARGV[2]) or ('dropped:' .. ARGV[3]))
return 1
