-- A firing's outcome for the jobs that run after it (core/events.py: `on: [{after:
-- ...}]`): when its job (or DAG) has any ('ds' on its hash job:<id>, set before such a job is
-- written), the run id, 's' (succeeded) or 'f' (failed for good) and when are appended
-- to the shard's outq LIST, which its owner works through (shard/event_chores.py);
-- otherwise nothing, one HGET. Callers define rcall.
local function note_outcome(base, owner, rid, state, now)
  if rcall('HGET', base .. 'job:' .. owner, 'ds') then
    rcall('RPUSH', base .. 'outq', rid .. '\n' .. state .. '\n' .. now)
  end
end
