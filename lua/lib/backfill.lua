-- Backfill pacing: a job's backfill ticks wait in bfq:<job> (ZSET tick -> tick) and at most
-- 'bfm' of its backfill runs are active at once ('bfa' counts them, in the job hash). A
-- backfill run ('bf' on its record) that ends its tick frees a place for the next.
-- Callers define rcall and include events.
local function backfill_release(base, ready, job, now)
  local job_key = base .. 'job:' .. job
  local info = rcall('HMGET', job_key, 'bfm', 'bfa')
  local limit, active = tonumber(info[1] or '0'), tonumber(info[2] or '0')
  local released = 0
  while active < limit do
    local head = rcall('ZPOPMIN', base .. 'bfq:' .. job)
    if #head == 0 then
      break
    end
    local rid = job .. ':' .. head[1] .. ':1'
    local run_key = base .. 'run:' .. rid
    if rcall('EXISTS', run_key) == 0 then
      rcall('HSET', run_key, 'st', 'scheduled', 'c', now, 'bf', '1')
      rcall('ZADD', base .. 'runs:' .. job, head[1], rid)
      rcall('XADD', ready, '*', 'r', rid)
      emit_event(base, rid, '', 'scheduled', '', 'backfill')
      active = rcall('HINCRBY', job_key, 'bfa', 1)
      released = released + 1
    end
  end
  return released
end

-- A backfill run's tick ended: its place goes to the next waiting tick.
local function backfill_done(base, ready, job, now)
  rcall('HINCRBY', base .. 'job:' .. job, 'bfa', -1)
  return backfill_release(base, ready, job, now)
end
