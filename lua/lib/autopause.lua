-- Opt-in auto-pause: a job whose 'apa' field is N (its spec's auto_pause_after) is paused, with the reason
-- recorded, once its N most recent finished ticks all failed for good (dead_letter, or
-- failed with no attempt left; a success ends the streak). Looked at only when a run
-- fails for good, so the success path pays nothing: the completion (a worker's script,
-- whose Redis role may not write a job) lists the job in the shard's 'autopause' set, and
-- the owner's next fire call (fenced by its epoch) decides, before it fires anything.
-- The job's own event (its id, active>paused) goes on the shard's event stream. Callers
-- (fire.lua) define rcall and include events.
-- Keys it builds from the shard key base (each script's hash slot): job:<id>, run:<id>,
-- runs:<job>, segs:<job>, timer, vers:<job>.
-- @include events
-- @include segments
-- @include versions

-- The owner pauses the job if its streak reached its limit. Needs lib/segments.lua and
-- lib/versions.lua.
local function auto_pause_check(base, job, now)
  local job_key = base .. 'job:' .. job
  local info = rcall('HMGET', job_key, 'status', 'apa')
  local limit = tonumber(info[2])
  if info[1] ~= 'active' or not limit then
    return false
  end
  local streak = 0
  local rids = rcall('ZRANGE', base .. 'runs:' .. job, '+inf', '-inf', 'BYSCORE', 'REV',
    'LIMIT', 0, limit * 4 + 8)
  for _, rid in ipairs(rids) do
    local run = rcall('HMGET', base .. 'run:' .. rid, 'st', 'nx')
    if run[1] == 'succeeded' then
      break
    end
    if run[1] == 'dead_letter' or (run[1] == 'failed' and not run[2]) then
      streak = streak + 1
      if streak >= limit then
        break
      end
    end
  end
  if streak < limit then
    return false
  end
  local timer_key, segs_key = base .. 'timer', base .. 'segs:' .. job
  materialize_segments(job_key, segs_key)
  rcall('RPUSH', segs_key, 'c|' .. (rcall('ZSCORE', timer_key, job) or '') .. '|' .. now)
  keep_version(job_key, base .. 'vers:' .. job)
  rcall('HSET', job_key, 'status', 'paused', 'updated', now, 'pa', now, 'pu', '',
    'pr', 'auto-paused after ' .. limit .. ' consecutive failures')
  rcall('HINCRBY', job_key, 'version', 1)
  rcall('ZREM', timer_key, job)
  emit_event(base, job, 'active', 'paused', '', 'auto-paused after ' .. limit ..
    ' consecutive failures')
  return true
end
