"""Liveness: an active job always has a next fire, or a recorded reason why not; the
owner's watch over deadlines (:func:`watch_deadlines`); and its pacer of paced backfills,
owed ticks released at most N a minute (:func:`release_paced`).

A job whose timer entry is gone (a bug, a hand-edited Redis, a restore gone wrong) would
silently never fire again, as schedulers are known to do. Each maintenance round the
owner looks at a slice of one held shard's jobs (lua/check_timers.lua, SLICE jobs, the
shards in turn, so a pass over 500,000 jobs costs a node a millisecond of Redis a second)
and puts back the entry of any active job found without one and without a reason
(lua/repair_timers.lua, fenced), as a recorded decision: a 'repair' in the job's change
log, ``shardsched_timer_repairs_total``, and an alert (ShardschedTimerRepaired).

The entry goes back at the first tick after the last one the job's ledger knows (its
newest run or skip record, else its first fire), with its spread offset, so its own
catch-up policy decides what happens to the ticks it lost, as after any outage; a
schedule that fires no more is marked exhausted instead.
"""

from __future__ import annotations

import logging

import msgspec

from shardsched.core.jitter import offset_ms
from shardsched.core.models import Timing
from shardsched.core.schedule import next_fire_ms
from shardsched.runtime.metrics import Metrics
from shardsched.store import ready
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.lua import liveness as lua
from shardsched.store.redis import Redis
from shardsched.store.redis.errors import reply_error

log = logging.getLogger(__name__)

SLICE = 1000  #: jobs looked at per round (one shard's slice)
_timing = msgspec.json.Decoder(Timing)


def replanned(lost: lua.Lost) -> int | None:
    """The timer score to put a lost job back at: its first tick after the last one its
    ledger knows, planned (plus its offset); None when its schedule fires no more."""
    timing = _timing.decode(lost.timing)
    off = offset_ms(lost.job, timing.spread_s)
    known = [t for t in (lost.last_run, lost.last_skip) if t is not None]
    if known:
        tick = next_fire_ms(timing.schedule, max(known))
    else:
        tick = None if lost.first is None else lost.first - off
    return None if tick is None else tick + off


class TimerCheck:
    """The owner's liveness sweep, one slice a round (called by shard/maintenance.py)."""

    def __init__(self, redis: Redis, dep: Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics
        self._cursor: dict[int, int] = {}  #: shard -> rank to go on from
        self._turn = 0
        self.repaired = 0  #: entries put back (or jobs marked exhausted) here
        self.passes = 0  #: slices that reached the end of their shard

    async def round(self, held: list[tuple[int, int]]) -> None:
        if not held:
            return
        shard, epoch = sorted(held)[self._turn % len(held)]
        self._turn += 1
        sk = self.dep.shard(shard)
        start = self._cursor.get(shard, 0)
        (reply,) = await redis_calls(self.redis, [lua.check_timers(sk, epoch, start, SLICE)])
        if isinstance(reply, Exception):  # a Redis error reply (full, a failover): weather,
            raise reply_error(reply)  # waited out by the caller's backoff (shard/rounds.py)
        checked = lua.decode_checked(reply)
        if checked is None:
            return
        self._cursor[shard], lost = checked
        self.passes += checked[0] == 0
        if not lost:
            return
        items = [(job.job, replanned(job)) for job in lost]
        (done,) = await redis_calls(
            self.redis, [lua.repair_timers(sk, self.dep.globals, epoch, items)]
        )
        if isinstance(done, Exception):
            raise reply_error(done)
        if done[0] == 1 and done[1]:
            self.repaired += int(done[1])
            self.metrics.timer_repairs.inc(int(done[1]))
            log.error(
                "shard %d: %d active job(s) had no timer entry and no reason: re-planned (%s)",
                shard,
                done[1],
                ", ".join(j.decode() for j in done[2:12]),
                extra={"shard": shard, "epoch": epoch},
            )


async def watch_deadlines(
    redis: Redis, dep: Deployment, metrics: Metrics, held: list[tuple[int, int]]
) -> int:
    """Each held shard's due deadlines and dead-man's switches, looked at (one round trip;
    lua/deadlines.lua records each miss); returns how many were missed."""
    if not held:
        return 0
    calls = [lua.deadlines(dep.shard(shard), epoch) for shard, epoch in held]
    total = 0
    for (shard, _), reply in zip(held, await redis_calls(redis, calls), strict=True):
        if isinstance(reply, Exception):
            log.error("deadlines of shard %d: %s", shard, reply)
            continue
        missed = lua.decode_missed(reply)
        if missed is None:
            continue
        for kind, n in (
            ("start", missed.started_late),
            ("finish", missed.finished_late),
            ("success", len(missed.silent)),
        ):
            if n:
                metrics.deadlines_missed.labels(kind).inc(n)
                total += n
        if missed.silent:
            log.warning(
                "shard %d: no successful run within its dead-man's switch: %s",
                shard,
                ", ".join(missed.silent[:10]),
                extra={"shard": shard},
            )
    return total


async def release_paced(redis: Redis, dep: Deployment, held: list[tuple[int, int]]) -> int:
    """Each held shard's paced backfills (a resume's ``paced``), released as far as their
    paces allow now (lua/release_paced.lua), and a worker of each queue woken; returns
    how many runs were released."""
    if not held:
        return 0
    calls = [jobs_lua.release_paced(dep.shard(shard), epoch) for shard, epoch in held]
    total, wakes = 0, []
    for (shard, _), reply in zip(held, await redis_calls(redis, calls), strict=True):
        if isinstance(reply, Exception):
            log.error("paced backfills of shard %d: %s", shard, reply)
        elif reply[0] == 1 and reply[1]:
            total += int(reply[1])
            wakes += [(shard, q) for q in ready.woken(reply[2])]
    if wakes:
        await redis_calls(redis, ready.push_wakes(dep.globals, wakes))
    return total
