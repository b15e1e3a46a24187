#!lua
--[[
  The shard owner adds the jobs made before the shard kept an index of names (lib/names)
  to it, a slice at a time, once: after the last slice the shard is marked indexed.
  Jobs made, renamed or deleted meanwhile keep the index themselves; adding a name twice
  changes nothing, so a slice read again after a takeover is harmless.

  KEYS[1] jobs    ZSET job_id -> creation (ms): the slices are ranks of it
  KEYS[2] epoch   STRING the shard's fencing token
  KEYS[3] indexed STRING 'done', or the rank the next slice starts at (absent: 0)
  Keys built from the base: job:<id>, and the index of names, names:<bucket> HASHes and
  named:<name> SETs (lib/names).
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; job:<id> is built from it (same hash slot)
  ARGV[3] how many jobs a slice looks at

  Returns {1, indexed} after a slice (more to come), {0, indexed} when the shard is done
  (indexed: names added by this call), or {-1} when the caller's epoch is stale.
]]
local rcall = redis.call
-- @include names
local jobs_key, epoch_key, indexed_key = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[2]
if rcall('GET', epoch_key) ~= ARGV[1] then
  return {-1}
end
local at = rcall('GET', indexed_key)
if at == 'done' then
  return {0, 0}
end
at = tonumber(at or '0')
local count = tonumber(ARGV[3])
local ids = rcall('ZRANGE', jobs_key, at, at + count - 1)
local added = 0
for _, job in ipairs(ids) do
  local f = rcall('HMGET', base .. 'job:' .. job, 'spec', 'status', 'dag', 'kind')
  if f[1] and f[2] ~= 'deleted' and not f[3] and not f[4] then
    local ok, spec = pcall(cjson.decode, f[1])
    if ok and type(spec) == 'table' and type(spec.name) == 'string' then
      name_add(base, spec.name, job)
      added = added + 1
    end
  end
end
if #ids < count then
  rcall('SET', indexed_key, 'done')
  return {0, added}
end
rcall('SET', indexed_key, at + count)
return {1, added}
