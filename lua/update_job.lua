#!lua
--[[
  Change a job (PATCH): its definition, its timing or its status, re-scoring its one
  timer entry atomically. Optimistic: the caller read version V and computed the new
  definition from it; if the job moved on meanwhile nothing is written.

  A change of timing or status closes the job's current schedule segment at the timer's
  score (ticks from there on are no longer expected) and, if the job stays active, opens
  a new one at the new first fire: the audit's record of what should have fired.

  KEYS[1] job     HASH the job
  KEYS[2] timer   ZSET job_id -> next fire (ms)
  KEYS[3] segs    LIST the job's schedule segments
  KEYS[4] versions HASH the job's earlier definitions (lib/versions.lua)
  KEYS[5] resumes  ZSET job_id -> paused_until (ms): the shard's paused jobs to resume
  KEYS[6] changes  STREAM the job's change log (lib/changes.lua)
  ARGV[1] job id
  ARGV[2] version the caller read
  ARGV[3] spec JSON
  ARGV[4] timing JSON
  ARGV[5] status: active | paused
  ARGV[6] next fire (ms), '' to remove the timer entry, '=' to keep it as it is (an
          active job given '' never fires again: marked 'nf' = 'exhausted', the reason
          check_timers.lua reads; a next fire clears it)
  ARGV[7] lease (ms)
  ARGV[8] wake channel
  ARGV[9] shard number
  ARGV[10] '1' when timing or status changed (segment roll-over), else '0'
  ARGV[11] pause reason ('' none; kept only while paused)
  ARGV[12] paused until (ms; '' none): the owner resumes the job then (KEYS[5])
  ARGV[13] auto-pause after N failures ('' never): stored as the field lib/autopause reads
  ARGV[14] who makes the change (the new version's 'by')
  ARGV[15] the change, for the log: update | pause | resume
  ARGV[16] its detail ('' none), for the log
  ARGV[17] the job's queue ('' the default; '=' or absent: as it is; lib/queues.lua)
  ARGV[18] a job's name at the version read ('' for a DAG)
  ARGV[19] its name now ('' for a DAG): a rename moves it in the shard's index of names
           (names:<bucket> and named:<name>, built from the base; lib/names.lua)
  ARGV[20] '1': a deleted one may be brought back (a DAG created again or restored: its
           next incarnation, 'inc' counting them and 'born' when this one began; its
           history stays; ARGV[15] says 'recreate'); absent: a deleted one is refused

  ARGV[21] its dead-man's switch (ms; '' none; '=' or absent: as it is): kept as 'dms',
           armed in deadman (built from the base) at now + it unless armed already

  Returns {1, version, now_ms}; {-1} no such job; {-2} deleted; {-3} version moved on.
]]
local rcall = redis.call
-- @include clock
-- @include changes
-- @include jobqueue
-- @include names
local job_key, timer_key, segs_key, versions_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

-- @include segments
-- @include versions

local job = ARGV[1]
local cur = rcall('HMGET', job_key, 'status', 'version')
if not cur[1] then
  return {-1}
end
if cur[1] == 'deleted' and ARGV[20] ~= '1' then
  return {-2}
end
if cur[2] ~= ARGV[2] then
  return {-3}
end
local now = server_now_ms()
local score = rcall('ZSCORE', timer_key, job)
if ARGV[10] == '1' then
  materialize_segments(job_key, segs_key)  -- before 'timing' is overwritten
end
keep_version(job_key, versions_key)
local version = rcall('HINCRBY', job_key, 'version', 1)
if cur[1] == 'deleted' then
  local inc = rcall('HINCRBY', job_key, 'inc', 1)
  rcall('HSET', job_key, 'born', now, 'inc', math.max(inc, 2))
end
rcall('HSET', job_key, 'spec', ARGV[3], 'timing', ARGV[4], 'status', ARGV[5],
  'updated', now, 'lease', ARGV[7], 'by', ARGV[14])
log_change(KEYS[6], ARGV[15], ARGV[14], version, ARGV[16])
local base = string.sub(job_key, 1, -5 - #job)
if ARGV[17] and ARGV[17] ~= '=' then
  set_job_queue(base, job_key, ARGV[17], false)
end
if ARGV[19] and ARGV[18] ~= ARGV[19] then
  name_remove(base, ARGV[18], job)
  name_add(base, ARGV[19], job)
end
if ARGV[13] ~= '' then
  rcall('HSET', job_key, 'apa', ARGV[13])
else
  rcall('HDEL', job_key, 'apa')
end
if ARGV[21] and ARGV[21] ~= '=' then
  if ARGV[21] == '' then
    rcall('HDEL', job_key, 'dms')
    rcall('ZREM', base .. 'deadman', job)
  else
    rcall('HSET', job_key, 'dms', ARGV[21])
    rcall('ZADD', base .. 'deadman', 'NX', now + tonumber(ARGV[21]), job)
  end
end
local new = ARGV[6]
if new == '=' then
  new = score or ''
end
if new == '' then
  rcall('ZREM', timer_key, job)
  if ARGV[5] == 'active' and ARGV[6] ~= '=' then
    rcall('HSET', job_key, 'nf', 'exhausted')  -- active, and never fires again: said so
  elseif ARGV[5] == 'paused' then
    rcall('HDEL', job_key, 'nf')  -- paused: its resume plans it (a job created paused)
  end
else
  rcall('ZADD', timer_key, new, job)
  rcall('HDEL', job_key, 'nf')
end
if ARGV[10] == '1' then
  if cur[1] == 'active' then
    rcall('RPUSH', segs_key, 'c|' .. (score or '') .. '|' .. now)
  end
  if ARGV[5] == 'active' and new ~= '' then
    rcall('RPUSH', segs_key, 'o|' .. new .. '|' .. ARGV[4])
  end
end
local resumes_key = KEYS[5]
if ARGV[5] == 'paused' then
  rcall('HSET', job_key, 'pr', ARGV[11], 'pu', ARGV[12], 'pa', cur[1] == 'paused' and
    (rcall('HGET', job_key, 'pa') or now) or now)
  if ARGV[12] ~= '' then
    rcall('ZADD', resumes_key, ARGV[12], job)
  else
    rcall('ZREM', resumes_key, job)
  end
else
  rcall('HDEL', job_key, 'pr', 'pu', 'pa', 'cf')
  rcall('ZREM', resumes_key, job)
end
rcall('PUBLISH', ARGV[8], ARGV[9])
return {1, version, now}
