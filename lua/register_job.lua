#!lua
--[[
  Register new jobs of one shard (one, or a bulk batch): each job's definition, its one
  timer entry, its place in the shard index, and the opening of its first schedule
  segment (what the audit expects of it).

  KEYS[1] timer   ZSET job_id -> next fire (ms)
  KEYS[2] jobs    ZSET job_id -> creation (ms)
  ARGV[1] shard key base; job:<id> (HASH) is built from it (same hash slot). The job's
          first schedule segment is its 'first' field and its timing: the segs:<id> list
          is only written when the job changes (update_job), a key saved per job.
  ARGV[2] wake channel (published once if any job has a first fire)
  ARGV[3] shard number
  ARGV[4] who registers them: the 'by' of version 1 (the change log's 'create' is read
          from it, so a job never changed costs no log key)
  ARGV[5..] items of 10: job id, spec JSON, timing JSON, first fire (ms, or '' when the
          job never fires), lease (ms), auto-pause after N failures ('' never), queue
          ('' the default; lib/queues.lua), name (the shard's index of names:
          names:<bucket> and named:<name>, built from the base; lib/names), its dead-man's
          switch (ms; '' none: else kept as 'dms' and armed in deadman at now + it), the
          name's bucket (the first two hex digits of its SHA-1, store/keys.py)

  Returns {now_ms, code1, code2, ...}: 1 registered, 2 re-created, -1 the job id is
  taken (that job untouched).
  A job registered with no first fire (its schedule never fires) is marked 'nf'
  ('exhausted': the reason it has no timer entry, which check_timers.lua reads).
  A deleted job's id is re-created as a new incarnation of it: the job's hash, runs,
  versions and change log stay (its old history stays readable), its version goes on, its
  'inc' counts incarnations (absent: 1) and 'born' is when this one began. Its earlier
  schedule segments stay closed and a new one opens. Run ids cannot collide with the old
  ones: scheduled ticks are after 'born' (a backfill is refused before it, ops/backfill),
  and runs by hand go on counting ('triggers').
  Keys of a re-created job built from the base: segs:<id>, vers:<id> (lib/versions) and
  chg:<id> (lib/changes); and deadman, the shard's ZSET of dead-man's switches.
]]
local rcall = redis.call
-- @include clock
-- @include jobqueue
-- @include changes
-- @include segments
-- @include versions
-- @include names
local timer_key, jobs_key = KEYS[1], KEYS[2]
local base = ARGV[1]
local now = server_now_ms()
local out = {now}

local function arm_deadman(job_key, job, within)
  if within ~= '' then
    rcall('HSET', job_key, 'dms', within)
    rcall('ZADD', base .. 'deadman', now + tonumber(within), job)
  end
end
local wake = false
local actor = ARGV[4]
for i = 5, #ARGV, 10 do
  local job, spec, timing, first, lease = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local job_key = base .. 'job:' .. job
  local status = rcall('HGET', job_key, 'status')
  if status == 'deleted' and not rcall('HGET', job_key, 'dag') then
    local segs_key = base .. 'segs:' .. job
    materialize_segments(job_key, segs_key)
    keep_version(job_key, base .. 'vers:' .. job)
    local version = rcall('HINCRBY', job_key, 'version', 1)
    local inc = rcall('HINCRBY', job_key, 'inc', 1)
    if inc == 1 then
      inc = 2
      rcall('HSET', job_key, 'inc', '2')
    end
    rcall('HSET', job_key, 'spec', spec, 'timing', timing, 'status', 'active',
      'updated', now, 'lease', lease, 'by', actor, 'born', now, 'first', first)
    rcall('HDEL', job_key, 'apa', 'cf', 'pr', 'pu', 'pa', 'nf', 'fc', 'dms')
    if ARGV[i + 5] ~= '' then
      rcall('HSET', job_key, 'apa', ARGV[i + 5])
    end
    set_job_queue(base, job_key, ARGV[i + 6], false)
    log_change(base .. 'chg:' .. job, 'recreate', actor, version, 'incarnation ' .. inc)
    if first ~= '' then
      rcall('RPUSH', segs_key, 'o|' .. first .. '|' .. timing)
      rcall('ZADD', timer_key, first, job)
      wake = true
    else
      rcall('HSET', job_key, 'nf', 'exhausted')
    end
    name_add(base, ARGV[i + 7], job, ARGV[i + 9])
    arm_deadman(job_key, job, ARGV[i + 8])
    out[#out + 1] = 2
  elseif status then
    out[#out + 1] = -1
  else
    rcall('HSET', job_key, 'spec', spec, 'timing', timing, 'status', 'active',
      'created', now, 'updated', now, 'version', '1', 'lease', lease, 'first', first,
      'by', actor)
    if ARGV[i + 5] ~= '' then
      rcall('HSET', job_key, 'apa', ARGV[i + 5])  -- the policy, as a field (lib/autopause)
    end
    set_job_queue(base, job_key, ARGV[i + 6], true)
    rcall('ZADD', jobs_key, now, job)
    name_add(base, ARGV[i + 7], job, ARGV[i + 9])
    arm_deadman(job_key, job, ARGV[i + 8])
    if first ~= '' then
      rcall('ZADD', timer_key, first, job)
      wake = true
    else
      rcall('HSET', job_key, 'nf', 'exhausted')  -- never fires: said so (check_timers)
    end
    out[#out + 1] = 1
  end
end
if wake then
  rcall('PUBLISH', ARGV[2], ARGV[3])
end
return out
