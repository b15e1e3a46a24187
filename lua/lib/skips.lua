-- The one writer of skip records: the ticks a policy decided not to run, kept in the job's
-- skips:<job> ZSET (scored by the first skipped tick) as "first:last:count:reason:now",
-- the format ops/ledger.py reads (core.catchup.Skip). Callers define rcall.
local function record_skip(base, job, first, last, count, reason, now)
  rcall('ZADD', base .. 'skips:' .. job, first,
    first .. ':' .. last .. ':' .. count .. ':' .. reason .. ':' .. now)
end
