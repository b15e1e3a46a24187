-- Run ids, the grammar of core/ids.py: <job>:<tick>:<attempt>, where a DAG task's job is
-- <dag>.<task> and a run by hand's tick is t<n>; a job id holds no ':'. Every script
-- builds and reads a run id through these, never by a pattern of its own.
-- An attempt is best passed as a string ('1'): a number costs Redis a '%.14g' format.
local function run_id(job, tick, attempt)
  return job .. ':' .. tick .. ':' .. attempt
end

-- A run id's job, tick and attempt (strings); nil when it is no run id. Neither a job id
-- nor a tick holds a ':', so each part is matched up to the next one: a leading '.+'
-- would run to the end of the id and back (hundreds of instructions a run).
local function parse_run_id(rid)
  return string.match(rid, '^([^:]+):([^:]+):(%d+)$')
end

local function job_of_run(rid)
  return (string.match(rid, '^([^:]+):[^:]+:%d+$'))
end

-- A run id less its attempt: the firing every attempt of it shares (<job>:<tick>).
local function firing_of(rid)
  return (string.match(rid, '^([^:]+:[^:]+):%d+$'))
end

-- The id of the same firing's next attempt.
local function next_attempt(rid)
  local job, tick, attempt = parse_run_id(rid)
  return run_id(job, tick, tonumber(attempt) + 1)
end

-- What a run's next attempt takes from it: a run by hand's tick as scheduled ('s'), its
-- args and its queue ('q'), each when it has one. Callers define rcall.
local function carry_to_next(next_key, scheduled, args, queue)
  if scheduled then
    rcall('HSET', next_key, 's', scheduled)
  end
  if args then
    rcall('HSET', next_key, 'args', args)  -- a retry runs with the same args
  end
  if queue then
    rcall('HSET', next_key, 'q', queue)  -- and on the same queue
  end
end
