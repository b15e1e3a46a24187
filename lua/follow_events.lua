#!lua
--[[
  The shard owner read its event stream up to <cursor> for notifications
  (shard/follower.py): keep where it got to, and which jobs have a failure noted (so their
  next success is a recovery). Fenced: a stale owner writes nothing.

  KEYS[1] epoch    STRING the shard's fencing token
  KEYS[2] cursor   STRING the last event stream entry id read
  KEYS[3] failing  SET job ids with a failure noted and no success since
  ARGV[1] epoch the caller holds
  ARGV[2] the new cursor (an entry id of the shard's events stream)
  ARGV[3] how many of the items are jobs to add to failing (the rest leave it)
  ARGV[4..] job ids

  Returns 1; -1 when the caller's epoch is stale.
]]
local rcall = redis.call
if rcall('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
rcall('SET', KEYS[2], ARGV[2])
local adds = tonumber(ARGV[3])
for i = 4, #ARGV do
  if i - 3 <= adds then
    rcall('SADD', KEYS[3], ARGV[i])
  else
    rcall('SREM', KEYS[3], ARGV[i])
  end
end
return 1
