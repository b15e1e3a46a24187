-- A run of a job made now by a trigger rather than its clock (by hand, an event, a hook):
-- its record run:<id> and its place in runs:<job>, run id <job>:t<n>:1 with n the job's trigger count, its record, its args (kept for its
-- retries under args:<job>:t<n>, where a worker cannot write), the job's runs index, its
-- queue's stream (lib/queues.lua) and the scheduled event. ``cause`` ('' none) says what
-- made it ('event:<id>'), shown with the run; ``detail`` is the event's detail (manual,
-- event). Callers define rcall and include runids, queues and events. Returns the run id.
local function make_triggered_run(base, job_key, job, args, now, cause, detail)
  local n = rcall('HINCRBY', job_key, 'triggers', 1)
  local rid = run_id(job, 't' .. n, '1')
  local run_key = base .. 'run:' .. rid
  local q = rcall('HGET', job_key, 'q')
  rcall('HSET', run_key, 's', now, 'st', 'scheduled', 'c', now)
  if q then
    rcall('HSET', run_key, 'q', q)
  end
  if args ~= '' then
    rcall('HSET', run_key, 'args', args)  -- shown with the run
  end
  if cause ~= '' then
    rcall('HSET', run_key, 'cause', cause)
  end
  rcall('SET', base .. 'args:' .. job .. ':t' .. n, args)
  rcall('ZADD', base .. 'runs:' .. job, now, rid)
  enqueue(base, rid, q)
  emit_event(base, rid, '', 'scheduled', '', detail)
  return rid
end
