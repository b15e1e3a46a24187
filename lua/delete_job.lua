#!lua
--[[
  Delete a job: it leaves the timer and never fires again; its definition and its run
  history stay readable (status 'deleted'). Its schedule segment closes at the timer's
  score: ticks from there on are no longer expected.

  KEYS[1] job     HASH the job
  KEYS[2] timer   ZSET job_id -> next fire (ms)
  KEYS[3] segs    LIST the job's schedule segments
  KEYS[4] versions HASH the job's earlier definitions (lib/versions.lua)
  KEYS[5] changes  STREAM the job's change log (lib/changes.lua)
  ARGV[1] job id
  ARGV[2] wake channel
  ARGV[3] shard number
  ARGV[4] who deletes it (the last version's 'by')
  ARGV[5] a job's name, which leaves the shard's index of names ('' a DAG):
          names:<bucket> and named:<name>, built from the job key's base (lib/names.lua)

  Returns {1, now_ms}; {-1} no such job; {-2} already deleted.
]]
local rcall = redis.call
-- @include clock
-- @include changes
-- @include live
-- @include names
local job_key, timer_key, segs_key, versions_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

-- @include segments
-- @include versions

local status, refused = live_status(job_key)
if refused then
  return refused
end
local now = server_now_ms()
if status == 'active' then
  materialize_segments(job_key, segs_key)
  rcall('RPUSH', segs_key, 'c|' .. (rcall('ZSCORE', timer_key, ARGV[1]) or '') .. '|' .. now)
end
keep_version(job_key, versions_key)
rcall('HSET', job_key, 'status', 'deleted', 'updated', now, 'by', ARGV[4])
rcall('HDEL', job_key, 'pr', 'pu', 'pa')
local version = rcall('HINCRBY', job_key, 'version', 1)
log_change(KEYS[5], 'delete', ARGV[4], version, '')
rcall('ZREM', timer_key, ARGV[1])
if ARGV[5] and ARGV[5] ~= '' then
  name_remove(string.sub(job_key, 1, -5 - #ARGV[1]), ARGV[5], ARGV[1])
end
rcall('PUBLISH', ARGV[2], ARGV[3])
return {1, now}
