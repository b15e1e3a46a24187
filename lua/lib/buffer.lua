-- Buffered overlap (a job's overlap buffer_one or buffer_all): a tick that falls due
-- while the job's last run is active waits in buf:<job> (LIST of ticks, oldest first)
-- instead of running beside it or being skipped; when that run ends for good, the
-- oldest waiting tick runs (one at a time: its run becomes the job's active one).
-- fire.lua pushes, complete.lua and cancel_run.lua release. Callers define rcall and
-- include events and queues.
-- Keys it builds from the shard key base (each script's hash slot): buf:, job:<id>,
-- run:<id>, runs:<job>.
-- @include runids
-- @include events
-- @include queues
local BUFFER_MAX = 1000  -- buffer_all holds at most this many (buffer_one: 1)

-- Hold `tick` for later; false when the buffer is full (the caller records a skip).
local function buffer_push(base, job, tick, most)
  local key = base .. 'buf:' .. job
  if rcall('LLEN', key) >= math.min(most, BUFFER_MAX) then
    return false
  end
  rcall('RPUSH', key, tick)
  emit_event(base, run_id(job, tick, '1'), '', 'buffered', '', 'overlap: waits for the active run')
  return true
end

-- The job's active run ended for good: its oldest waiting tick runs now (1 made, else 0).
local function buffer_release(base, job, now)
  local key = base .. 'buf:' .. job
  while true do
    local tick = rcall('LPOP', key)
    if not tick then
      return 0
    end
    local rid = run_id(job, tick, '1')
    local run_key = base .. 'run:' .. rid
    if rcall('EXISTS', run_key) == 0 then
      local job_key = base .. 'job:' .. job
      local q = rcall('HGET', job_key, 'q') or ''
      if q ~= '' then
        rcall('HSET', run_key, 'st', 'scheduled', 'c', now, 'q', q)
      else
        rcall('HSET', run_key, 'st', 'scheduled', 'c', now)
      end
      rcall('ZADD', base .. 'runs:' .. job, tick, rid)
      rcall('HSET', job_key, 'act', rid)
      enqueue(base, rid, q)
      emit_event(base, rid, 'buffered', 'scheduled', '', 'overlap: the active run ended')
      return 1
    end
  end
end

-- Run `rid` of `job` ended for good: if it was the job's active tick (any attempt of
-- it) and ticks wait, the oldest runs now. Returns 1 when one did, else 0.
local function buffer_ends(base, job, rid, now)
  if rcall('EXISTS', base .. 'buf:' .. job) == 0 then
    return 0
  end
  local active = rcall('HGET', base .. 'job:' .. job, 'act')
  if active and firing_of(active) ~= firing_of(rid) then
    return 0  -- another run of the job (by hand, a backfill): the active one goes on
  end
  return buffer_release(base, job, now)
end
