-- Cancelling a run (cancel_run.lua, and each task run of cancel_dag_run.lua): its record
-- ends 'cancelled' with who and why ('cb', 'r'), it leaves the set that would start it
-- again (retries, the shard's waiting set, dagwait), and it is never retried: a worker
-- still running it learns at its next lease renewal (lua/renew_runs.lua answers -3) and
-- stops the job's process group, and its completion is refused (lua/complete.lua). A
-- scheduled run's stream entry stays where it is: the claim that reads it drops it.
-- Callers define rcall and include events and changes first.
-- Keys it builds from the shard key base (each script's hash slot): run:<id>.
-- @include events
-- @include queues
local CANCELLABLE = {scheduled = true, claimed = true, running = true, retrying = true,
  waiting = true}

-- Cancel run `rid` (its record's state `was`, one of CANCELLABLE); `sets` names the
-- shard's retries, waiting and dagwait keys (the caller's KEYS). Returns nothing.
local function cancel_one(base, sets, rid, was, now, actor, reason)
  rcall('HSET', base .. 'run:' .. rid, 'st', 'cancelled', 'f', now, 'r', reason, 'cb', actor)
  if was == 'retrying' then
    rcall('ZREM', sets.retries, rid)
  elseif was == 'waiting' then
    rcall('ZREM', sets.waiting, rid)
  end
  rcall('ZREM', sets.dagwait, rid)
  emit_event(base, rid, was, 'cancelled', '', reason)
end

-- What a cancel records as the run's reason.
local function cancel_reason(actor, why)
  if why ~= '' then
    return 'cancelled by ' .. actor .. ': ' .. why
  end
  return 'cancelled by ' .. actor
end

-- The queues this call put runs on (lib/queues.lua, which callers include first): 0 when
-- none did, '' when only the default queue did, else the names.
local function released_queues()
  if woken or woken_default then
    return woken_queues()
  end
  return 0
end
