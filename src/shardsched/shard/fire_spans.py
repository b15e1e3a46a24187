"""The owner's ``shardsched.fire`` spans (runtime/tracing.py), kept off its hot path: a
fire call only notes what it wrote; the spans are made while the actor is idle, within a
budget of its idle time, so tracing never makes a tick late. A backlog past MAX_BACKLOG
(an owner busy for minutes) drops its oldest, counted."""

from __future__ import annotations

import logging
import time
from collections import deque

from shardsched.runtime.tracing import RunTracer
from shardsched.store.lua import firing

log = logging.getLogger(__name__)

MAX_BACKLOG = 200_000


class FireSpans:
    def __init__(self, tracer: RunTracer, shard: int) -> None:
        self.tracer = tracer
        self.shard = shard
        #: (firing key, epoch, start ms, end ms) of sampled ticks written
        self.backlog: deque[tuple[str, int, int, int]] = deque()
        self.dropped = 0

    def note(self, items: list[firing.FireItem], epoch: int, start_ms: int, end_ms: int) -> None:
        """A fire call wrote ``items`` (in [start, end], server clock)."""
        for item in items:
            if item.tick == "":
                continue
            job = item.job.decode() if isinstance(item.job, bytes) else str(item.job)
            key = f"{job}:{item.tick}"
            if self.tracer.samples_firing(key):
                self.backlog.append((key, epoch, start_ms, end_ms))
        while len(self.backlog) > MAX_BACKLOG:
            self.backlog.popleft()
            self.dropped += 1

    def emit(self, budget_s: float) -> None:
        """Make spans from the backlog for at most ``budget_s`` of CPU."""
        deadline = time.perf_counter() + budget_s
        while self.backlog and time.perf_counter() < deadline:
            for _ in range(min(100, len(self.backlog))):
                key, epoch, start_ms, end_ms = self.backlog.popleft()
                # only its own: the run's ids and its tick are on the root it sits under
                attributes = {"shardsched.shard": self.shard, "shardsched.epoch": epoch}
                self.tracer.fired(key, attributes, start_ms, end_ms)
        if self.dropped:
            log.warning("shard %d: %d fire spans dropped (backlog full)", self.shard, self.dropped)
            self.dropped = 0
