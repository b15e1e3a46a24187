"""The pure core: schedules, next fire, DST, ticks, catch-up, retry backoff, DAG topology,
shard assignment, ids, the data model and its validation. No trio, no Redis, no I/O:
every decision here is a function over frozen data, unit-tested without a server."""
