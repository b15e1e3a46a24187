-- The shard's event stream (README, Events): every state change of a run, appended by the very
-- script that makes it, to <base>events (STREAM, capped at about EVENTS_KEPT entries).
-- An entry's fields are run ids (a DAG run's id for a DAG run's own change), each value
-- "<old>><new>|<worker>|<detail>" (old '' for a run just made); the entry id is the
-- server's time. A hot path collects a call's events in a table it owns and appends them
-- as one entry (add_event, flush_events); a rare path appends one (emit_event). No state
-- is kept here: the table is the caller's. Callers define rcall.
local EVENTS_KEPT = '10000'  -- a string: a number argument costs Redis a '%.17g' each call
local function event_value(old, new, worker, detail)
  return old .. '>' .. new .. '|' .. (worker or '') .. '|' .. (detail or '')
end
local function add_event(events, rid, old, new, worker, detail)
  events[#events + 1] = rid
  events[#events + 1] = event_value(old, new, worker, detail)
end
local function flush_events(base, events)
  for i = 1, #events, 1000 do  -- unpack stays far below Lua's C-stack limit
    rcall('XADD', base .. 'events', 'MAXLEN', '~', EVENTS_KEPT, '*',
      unpack(events, i, math.min(i + 999, #events)))
  end
end
local function emit_event(base, rid, old, new, worker, detail)
  rcall('XADD', base .. 'events', 'MAXLEN', '~', EVENTS_KEPT, '*', rid,
    old .. '>' .. new .. '|' .. (worker or '') .. '|' .. (detail or ''))
end
