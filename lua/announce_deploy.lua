#!lua flags=allow-oom
--[[
  Announce a deploy of an app on one shard: from now on only the writes fenced with its
  generation (or a later one) land on this shard (lua/lib/fence.lua). A deploy announces
  itself on every shard before it reads what is there, so what an earlier deploy wrote
  before the announcement is what the later one reads and corrects, and nothing the
  earlier one tries after it lands.

  KEYS[1] fence   STRING the app's newest deploy generation announced on this shard
  ARGV[1] the deploy's generation (claimed by INCR of the app's generation key)

  Returns the shard's fence after the call: ARGV[1], or a later generation (the deploy is
  superseded: nothing changed).

  allow-oom: a few bytes, and a full Redis must not leave a deploy half fenced.
]]
local rcall = redis.call
local now = tonumber(rcall('GET', KEYS[1]) or '0')
local generation = tonumber(ARGV[1])
if now > generation then
  return now
end
rcall('SET', KEYS[1], ARGV[1])
return generation
