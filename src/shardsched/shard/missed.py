"""Ticks found missed (past their time plus the misfire grace), told: counted by job with
whether the job is labelled critical (the metric pages on it), logged, and written as an
event of the shard's stream, which notifications hear. The owner keeps no labels, so a
job's spec is read when it first misses, then again at most every :data:`CRITICAL_TTL_S`:
a miss is rare, but it comes in runs (a catch-up finds misses in every batch)."""

from __future__ import annotations

import contextlib
import logging
import math

import msgspec
import trio

from shardsched.core.labels import LabelsOnly, is_critical
from shardsched.runtime.metrics import Metrics
from shardsched.store.keys import ShardKeys
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)
_labels_decoder = msgspec.json.Decoder(LabelsOnly)
#: How long a job's critical label, read when it missed a tick, is believed.
CRITICAL_TTL_S = 60.0
#: The most jobs whose label is remembered (then all are forgotten at once).
CRITICAL_CACHE_MAX = 10_000
EVENTS_KEPT = 10_000  #: as lua/lib/events.lua caps a shard's event stream


class MissedTicks:
    """One shard actor's: its cache of critical labels lives as long as the actor."""

    def __init__(self, redis: Redis, keys: ShardKeys, shard: int, metrics: Metrics) -> None:
        self.redis, self.keys, self.shard, self.metrics = redis, keys, shard, metrics
        #: job -> (its critical label as the metric says it, trio time read)
        self._critical: dict[str, tuple[str, float]] = {}

    async def report(self, epoch: int, missed: dict[str, int]) -> None:
        """Count and log missed ticks, each job's with whether it is labelled critical: its
        spec is read when the job first misses, then again at most every CRITICAL_TTL_S
        (the owner keeps no labels, and a miss is rare but comes in runs)."""
        now = trio.current_time()
        cache = self._critical
        if len(cache) > CRITICAL_CACHE_MAX:
            cache.clear()
        jobs = [job for job in missed if now - cache.get(job, ("", -math.inf))[1] > CRITICAL_TTL_S]
        if jobs:
            try:
                specs = await self.redis.pipeline(
                    [("HGET", self.keys.job(job), "spec") for job in jobs]
                )
            except RedisError:
                specs = [None] * len(jobs)  # unknown, and asked again next time
            for job, raw in zip(jobs, specs, strict=True):
                if isinstance(raw, bytes):
                    with contextlib.suppress(msgspec.DecodeError):
                        labels = _labels_decoder.decode(raw).labels
                        cache[job] = ("true" if is_critical(labels) else "false", now)
        critical = {job: cache.get(job, ("unknown", 0.0))[0] for job in missed}
        metrics = self.metrics
        told: list[str] = []  #: each job's event (notifications hear of it: core/notify.py)
        for job, count in missed.items():
            told += [job, f"active>active||missed: {count} tick(s) past time + misfire grace"]
            metrics.missed.labels(metrics.job_label(job), critical[job]).inc(count)
            log.warning(
                "missed schedule: %d tick(s) past time + grace",
                count,
                extra={
                    "job_id": job,
                    "shard": self.shard,
                    "epoch": epoch,
                    "critical": critical[job],
                },
            )
        with contextlib.suppress(RedisError):  # a full Redis: the metric and log still say it
            await self.redis.execute(
                "XADD", self.keys.events, "MAXLEN", "~", EVENTS_KEPT, "*", *told
            )
