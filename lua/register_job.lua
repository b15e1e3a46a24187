#!lua
--[[
  Register a new job: its definition, its one timer entry, its place in the shard index,
  and the opening of its first schedule segment (what the audit expects of it).

  KEYS[1] job     HASH the job
  KEYS[2] timer   ZSET job_id -> next fire (ms)
  KEYS[3] jobs    ZSET job_id -> creation (ms)
  KEYS[4] segs    LIST the job's schedule segments: "o|<first fire>|<timing>",
                  "c|<timer score at close>|<close time>"
  ARGV[1] job id
  ARGV[2] spec JSON (JobSpec)
  ARGV[3] timing JSON (what the shard actor computes next fires from)
  ARGV[4] first fire (ms), or '' when the job never fires
  ARGV[5] lease (ms)
  ARGV[6] wake channel
  ARGV[7] shard number

  Returns {1, created_ms}, or {-1} when the job id is taken (nothing written).
]]
local rcall = redis.call
local job_key, timer_key, jobs_key, segs_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if rcall('EXISTS', job_key) == 1 then
  return {-1}
end
local t = rcall('TIME')
local now = t[1] .. string.format('%03d', math.floor(t[2] / 1000))
rcall('HSET', job_key, 'spec', ARGV[2], 'timing', ARGV[3], 'status', 'active',
  'created', now, 'updated', now, 'version', 1, 'lease', ARGV[5])
rcall('ZADD', jobs_key, now, ARGV[1])
if ARGV[4] ~= '' then
  rcall('ZADD', timer_key, ARGV[4], ARGV[1])
  rcall('RPUSH', segs_key, 'o|' .. ARGV[4] .. '|' .. ARGV[3])
  rcall('PUBLISH', ARGV[6], ARGV[7])
end
return {1, now}
