#!lua
--[[
  Put notification matches on the deployment's outbox, each once: a match's key (its
  event's place in its shard's stream, its rule and channel) is remembered a day, so an
  owner that read the same events again (a crash before it kept its cursor, a new owner)
  adds nothing twice.

  KEYS[1] outbox  STREAM matches waiting for the dispatcher (shard/dispatcher.py)
  KEYS[2] seen    ZSET match key -> when it was added (ms)
  ARGV[1] how long a key is remembered (ms)
  ARGV[2..] items of 9: key, rule id, channel, kind, rid, job id, at (ms), detail, worker

  Returns how many matches were added.
]]
local rcall = redis.call
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local added = 0
for i = 2, #ARGV, 9 do
  if rcall('ZADD', KEYS[2], 'NX', now, ARGV[i]) == 1 then
    rcall('XADD', KEYS[1], 'MAXLEN', '~', 1000000, '*', 'k', ARGV[i], 'r', ARGV[i + 1],
      'c', ARGV[i + 2], 'n', ARGV[i + 3], 'id', ARGV[i + 4], 'j', ARGV[i + 5],
      'at', ARGV[i + 6], 'd', ARGV[i + 7], 'w', ARGV[i + 8])
    added = added + 1
  end
end
rcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1]))
return added
