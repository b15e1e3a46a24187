-- Whether the caller holds a run: the invariant the design rests on (only the worker a
-- run was delivered to changes it, and only while it still holds it). ``run`` is an
-- HMGET of the run record that reads 'st', 'w', 'dt', 'e' first, in that order: its
-- state, its worker, the delivery token the worker was given, and its stream entry.
local function holds_run(run, state, worker, token, eid)
  return run[1] == state and run[2] == worker and run[3] == token and run[4] == eid
end
