#!lua
--[[
  The owner's mark of progress through the shard's outcomes (lua/lib/outcomes.lua): the
  first `count` entries of outq, dispatched to the jobs that run after them, are
  removed, only by the shard's owner and only while they are still the entries it read
  (its first one unchanged), so two owners of one shard for a moment remove no entry
  neither dispatched.

  KEYS[1] outq   LIST "run id\nstate\nms" of firings ended whose job has jobs after it
  KEYS[2] epoch  STRING the shard's fencing token
  ARGV[1] epoch the caller holds
  ARGV[2] how many entries it dispatched (from the head)
  ARGV[3] the first of them, as read

  Returns 1 removed; 0 the head is not what was read (nothing removed); -1 the caller's
  epoch is stale.
]]
local rcall = redis.call
if rcall('GET', KEYS[2]) ~= ARGV[1] then
  return -1
end
if rcall('LINDEX', KEYS[1], 0) ~= ARGV[3] then
  return 0
end
rcall('LTRIM', KEYS[1], tonumber(ARGV[2]), -1)
return 1
