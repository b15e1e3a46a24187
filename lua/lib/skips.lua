-- The one writer of skip records: the ticks a policy decided not to run, kept in the job's
-- skips:<job> ZSET (scored by the first skipped tick) as "first:last:count:reason:now",
-- the format ops/history/ledger.py reads (core.catchup.Skip), and an event (the first tick's run
-- id, detail "<reason> x<count>"). Callers define rcall and include events.
-- @include runids
-- @include events
local function record_skip(base, job, first, last, count, reason, now)
  rcall('ZADD', base .. 'skips:' .. job, first,
    first .. ':' .. last .. ':' .. count .. ':' .. reason .. ':' .. now)
  emit_event(base, run_id(job, first, '1'), '', 'skipped', '', reason .. ' x' .. count)
end
