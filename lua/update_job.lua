#!lua
--[[
  Change a job (PATCH): its definition, its schedule or its status, re-scoring its one
  timer entry atomically. Optimistic: the caller read version V and computed the new
  definition from it; if the job moved on meanwhile nothing is written.

  KEYS[1] job     HASH the job
  KEYS[2] timer   ZSET job_id -> next fire (ms)
  ARGV[1] job id
  ARGV[2] version the caller read
  ARGV[3] spec JSON
  ARGV[4] schedule JSON
  ARGV[5] status: active | paused
  ARGV[6] next fire (ms), '' to remove the timer entry, '=' to keep it as it is
  ARGV[7] lease (ms)
  ARGV[8] wake channel
  ARGV[9] shard number

  Returns {1, version, now_ms}; {-1} no such job; {-2} deleted; {-3} version moved on.
]]
local rcall = redis.call
local job_key, timer_key = KEYS[1], KEYS[2]
local cur = rcall('HMGET', job_key, 'status', 'version')
if not cur[1] then
  return {-1}
end
if cur[1] == 'deleted' then
  return {-2}
end
if cur[2] ~= ARGV[2] then
  return {-3}
end
local t = rcall('TIME')
local now = t[1] .. string.format('%03d', math.floor(t[2] / 1000))
local version = rcall('HINCRBY', job_key, 'version', 1)
rcall('HSET', job_key, 'spec', ARGV[3], 'sched', ARGV[4], 'status', ARGV[5],
  'updated', now, 'lease', ARGV[7])
if ARGV[6] == '' then
  rcall('ZREM', timer_key, ARGV[1])
elseif ARGV[6] ~= '=' then
  rcall('ZADD', timer_key, ARGV[6], ARGV[1])
end
rcall('PUBLISH', ARGV[8], ARGV[9])
return {1, version, now}
