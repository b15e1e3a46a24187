-- Backfill pacing: a job's backfill ticks wait in bfq:<job> (ZSET tick -> tick) and at most
-- 'bfm' of its backfill runs are active at once (its counter 'bfa' counts them). A
-- backfill run ('bf' on its record) that ends its tick frees a place for the next. It goes
-- to its job's queue in the band the backfill asked for ('bfb' on the job, low when
-- unset: a backfill never delays scheduled runs; lib/queues.lua).
-- A paced backfill ('bfp' on the job: ms between releases) is released only by the
-- owner's pacer (release_paced.lua, from the shard's bfpace ZSET) and by backfill.lua,
-- at most `cap` at a time: a run that ends frees a place, not a release.
-- Callers define rcall and include events, counters and queues.
-- Keys it builds from the shard key base (each script's hash slot): bfq:, job:<id>,
-- run:<id>, runs:<job>.
-- @include runids
-- @include counters
-- @include events
-- @include queues
local function backfill_release(base, ready, job, now, cap)
  local job_key = base .. 'job:' .. job
  local info = rcall('HMGET', job_key, 'bfm', 'bfp')
  local limit = tonumber(info[1] or '0')
  if cap == nil and tonumber(info[2] or '0') > 0 then
    return 0  -- paced: the pacer releases its ticks
  end
  cap = cap or limit
  local active = counter(base, job, 'bfa')
  local released = 0
  local q = nil  -- the job's queue (lib/queues.lua), read once there is a tick to release
  while active < limit and released < cap do
    local head = rcall('ZPOPMIN', base .. 'bfq:' .. job)
    if #head == 0 then
      break
    end
    local rid = run_id(job, head[1], '1')
    local run_key = base .. 'run:' .. rid
    if rcall('EXISTS', run_key) == 0 then
      if q == nil then
        local info = rcall('HMGET', job_key, 'q', 'bfb')
        q = string.gsub(info[1] or '', '%^.*$', '') .. (info[2] or '^l')
      end
      rcall('HSET', run_key, 'st', 'scheduled', 'c', now, 'bf', '1')
      if q ~= '' then
        rcall('HSET', run_key, 'q', q)
      end
      rcall('ZADD', base .. 'runs:' .. job, head[1], rid)
      enqueue(base, rid, q)
      emit_event(base, rid, '', 'scheduled', '', 'backfill')
      active = counter_add(base, job, 'bfa', 1)
      released = released + 1
    end
  end
  return released
end

-- A backfill run's tick ended: its place goes to the next waiting tick.
local function backfill_done(base, ready, job, now)
  counter_add(base, job, 'bfa', -1)
  return backfill_release(base, ready, job, now)
end
