"""Which running runs overrun: longer than twice their job's recent p99 here, or 90 % of
their timeout. A gauge per job, a log line when a job starts overrunning, the count the
worker publishes in the registry, and, once per run, an event on its shard's stream
(``running>running``, detail ``overrunning: …``) that notifications hear of."""

from __future__ import annotations

import logging
import math
from collections import OrderedDict, deque

import trio

from shardsched.core.ids import job_of_run
from shardsched.runtime.metrics import Metrics
from shardsched.store.deployment import Deployment
from shardsched.store.redis import Redis, RedisError
from shardsched.worker.holdings import Claimed, Holdings

log = logging.getLogger(__name__)

#: Durations kept per job, and jobs kept, for the overrunning check.
RECENT_DURATIONS = 50
DURATION_JOBS = 10_000
OVERRUN_CHECK_S = 1.0
EVENTS_KEPT = 10_000  #: as lua/lib/events.lua caps a shard's event stream


class OverrunTracker:
    def __init__(
        self,
        holdings: Holdings,
        metrics: Metrics,
        redis: Redis | None = None,
        dep: Deployment | None = None,
        worker_id: str = "",
    ) -> None:
        self.holdings = holdings
        self.metrics = metrics
        self.redis, self.dep, self.worker_id = redis, dep, worker_id
        #: runs told of on their shard's event stream (each once)
        self._told: OrderedDict[tuple[str, int], None] = OrderedDict()
        #: recent durations (s) of each job's runs here (bounded, least recent dropped)
        self._durations: OrderedDict[str, deque[float]] = OrderedDict()
        self.overrunning: dict[str, int] = {}

    def record(self, job_id: str, duration_s: float) -> None:
        """A run of the job finished here after ``duration_s``."""
        recent = self._durations.get(job_id)
        if recent is None:
            recent = self._durations[job_id] = deque(maxlen=RECENT_DURATIONS)
            if len(self._durations) > DURATION_JOBS:
                self._durations.popitem(last=False)
        else:
            self._durations.move_to_end(job_id)
        recent.append(duration_s)

    def p99(self, job_id: str) -> float | None:
        """The job's recent p99 duration here, once 5 runs are known."""
        recent = self._durations.get(job_id)
        if recent is None or len(recent) < 5:
            return None
        ordered = sorted(recent)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]

    def threshold(self, claimed: Claimed) -> float:
        """Seconds after which a run of this job is overrunning: 2x its recent p99 (from
        5 runs on; never under 1 s), or 90 % of its timeout, whichever comes first."""
        limit = math.inf
        if claimed.spec is not None:
            limit = 0.9 * claimed.spec.timeout_s
        p99 = self.p99(job_of_run(claimed.run_id))
        if p99 is not None:
            limit = min(limit, max(2 * p99, 1.0))
        return limit

    async def run(self) -> None:
        """Every second: which running runs overrun."""
        while True:
            await self.holdings.wait_running()
            await trio.sleep(OVERRUN_CHECK_S)
            news = self._check(trio.current_time())
            if news:
                await self._tell(news)

    async def _tell(self, news: list[tuple[Claimed, float, float]]) -> None:
        """One event per run that started overrunning (a Redis error: told next time)."""
        if self.redis is None or self.dep is None:
            return
        commands = []
        for claimed, elapsed, limit in news:
            detail = f"overrunning: running {elapsed:.0f}s, past its {limit:.0f}s"
            value = f"running>running|{self.worker_id}|{detail}"
            events = self.dep.shard(claimed.shard).events
            commands.append(
                ("XADD", events, "MAXLEN", "~", EVENTS_KEPT, "*", claimed.run_id, value)
            )
        try:
            await self.redis.pipeline(commands)
        except RedisError as exc:
            self.metrics.redis_error(log, "telling of overrunning runs", exc, 0)
            return
        for claimed, _, _ in news:
            self._told[claimed.key] = None
            if len(self._told) > DURATION_JOBS:
                self._told.popitem(last=False)

    def _check(self, now: float) -> list[tuple[Claimed, float, float]]:
        """Update the gauges; returns the runs overrunning not yet told of (with their
        elapsed time and limit)."""
        news: list[tuple[Claimed, float, float]] = []
        gauge, ratio, label = (
            self.metrics.overrunning,
            self.metrics.overrun_ratio,
            self.metrics.job_label,
        )
        counts: dict[str, int] = {}
        ratios: dict[str, float] = {}
        for claimed in [held.claimed for held in self.holdings.running()]:
            elapsed = now - claimed.claimed_local
            limit = self.threshold(claimed)
            if elapsed > limit:
                if claimed.key not in self._told:
                    news.append((claimed, elapsed, limit))
                job_id = job_of_run(claimed.run_id)
                counts[job_id] = counts.get(job_id, 0) + 1
                p99 = self.p99(job_id)
                if p99:
                    ratios[job_id] = max(ratios.get(job_id, 0.0), elapsed / p99)
        for job_id in set(self.overrunning) - set(counts):
            gauge.labels(label(job_id)).set(0)
            ratio.labels(label(job_id)).set(0)
        for job_id, count in counts.items():
            if job_id not in self.overrunning:
                log.warning("job %s overrunning", job_id, extra={"job_id": job_id})
            gauge.labels(label(job_id)).set(count)
            ratio.labels(label(job_id)).set(ratios.get(job_id, 0.0))
        self.overrunning = counts
        return news
