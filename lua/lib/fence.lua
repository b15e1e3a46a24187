--[[
  The prologue of a fenced script (store/scripts.py FENCED: the variant "fenced:<name>"
  of each script a deploy writes through): a deploy of an app writes only while its
  generation is the newest announced on the shard (lua/announce_deploy.lua). The last
  KEY is the shard's fence of the app, the last ARGV the deploy's generation; both are
  taken off before the script proper reads KEYS and ARGV, so it runs as written. A
  superseded deploy is refused before anything is written: the error reply
  'SUPERSEDED <the newest generation>'.
]]
local fence_generation = table.remove(ARGV)
local fence_now = redis.call('GET', table.remove(KEYS)) or '0'
if fence_now ~= fence_generation then
  return redis.error_reply('SUPERSEDED ' .. fence_now)
end
