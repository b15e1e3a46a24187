"""Keeping a worker's leases: every run it holds is renewed in batches, one script call
per shard per round, at a third of the shortest lease held. A run whose lease went
elsewhere, or that was cancelled, is stopped."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from shardsched.core.pacing import Backoff
from shardsched.runtime.metrics import Metrics
from shardsched.runtime.tracing import RunTracer
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.lua import runs as lua
from shardsched.store.redis import Redis, RedisError
from shardsched.worker import spans
from shardsched.worker.batching import by_shard, send_per_shard
from shardsched.worker.holdings import Claimed, Holdings, State

log = logging.getLogger(__name__)

#: The longest pause between renewal rounds, and the shortest.
MAX_RENEW_EVERY_S = 10.0
MIN_RENEW_EVERY_S = 0.2


class LeaseRenewer:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str,
        holdings: Holdings,
        metrics: Metrics,
        also: Callable[[list[Claimed]], Awaitable[None]] | None = None,
        tracer: RunTracer | None = None,
    ) -> None:
        self.tracer = tracer  #: None: tracing is off (worker/spans.py)
        #: renews what else the held runs hold, after their leases (concurrency keys)
        self.also = also
        self.redis = redis
        self.dep = dep
        self.worker_id = worker_id
        self.holdings = holdings
        self.metrics = metrics
        self.every = MAX_RENEW_EVERY_S
        self._sooner = trio.Event()
        #: after a round Redis did not take (restarting, cut off), the next comes sooner:
        #: a lease must not lapse while the renewer waits out a full interval
        self._retry = Backoff(first=0.05, cap=0.5)
        self._failed = False

    def started(self, claimed: Claimed) -> None:
        """A run started: renew sooner if its lease is shorter than the current pace."""
        if claimed.spec is not None and claimed.spec.lease_s / 3 < self.every:
            self._sooner.set()

    def _interval(self) -> float:
        leases = [c.spec.lease_s for c in self.holdings.leased() if c.spec is not None]
        return min(max(min(leases, default=30.0) / 3, MIN_RENEW_EVERY_S), MAX_RENEW_EVERY_S)

    async def run(self) -> None:
        while True:
            self.every = self._interval()
            pause = min(self._retry.next(), self.every) if self._failed else self.every
            with trio.move_on_after(pause):
                await self._sooner.wait()  # a run with a shorter lease started
                self._sooner = trio.Event()
            # Finished runs whose completion Redis has not taken yet (full, restarting) are
            # still ours: keep their leases, or the owner would deliver them again.
            held = self.holdings.leased()
            self._failed = False
            if held:
                self._failed = not await self._renew(held)
                if self.also is not None:
                    await self.also(held)
            if not self._failed:
                self._retry.reset()

    async def _renew(self, held: list[Claimed]) -> bool:
        """One round; False when Redis took none or only some of it."""

        def call(shard: int, runs: list[Claimed]) -> Call:
            return lua.renew_runs(self.dep.shard(shard), self.worker_id, [c.delivery for c in runs])

        started = trio.current_time()
        try:
            sent = await send_per_shard(self.redis, by_shard(held, _shard), call)
        except RedisError as exc:
            self.metrics.redis_error(log, "lease renewal", exc, self.every)
            return False
        taken = True
        for _shard_n, runs, reply in sent:
            if isinstance(reply, Exception):
                self.metrics.redis_error(log, "lease renewal", reply, self.every)
                taken = False
                continue
            for c, (code, _lease) in zip(runs, lua.decode_renewed(reply), strict=True):
                if self.tracer is not None:
                    took_ms = round((trio.current_time() - started) * 1000)
                    error = None if code == lua.Held.APPLIED else lua.Held(int(code)).name.lower()
                    spans.renewed(self.tracer, c, took_ms, error)
                if code != lua.Held.APPLIED and self.holdings.state(c.key) is State.RUNNING:
                    fields = {"run_id": c.run_id, "shard": c.shard}
                    if code == lua.Held.CANCELLED:
                        log.warning("run %s was cancelled: stopping it", c.run_id, extra=fields)
                        spans.cancelled(c)
                        self.holdings.cancel(c.key)
                    else:
                        log.warning("run %s lost its lease: stopping it", c.run_id, extra=fields)
                        self.holdings.lose(c.key)
        return taken


def _shard(claimed: Claimed) -> int:
    return claimed.shard
