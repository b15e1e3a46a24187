"""Taking back runs whose worker lease lapsed, in every shard a node holds, in one round
trip: when the earliest lease deadline the owner knows of comes (reclaim.lua answers it,
claim.lua publishes earlier ones on the wake channel), and at least every
:data:`RECLAIM_MAX_WAIT_S`. A run that lapsed :data:`POISON_LAPSES` times in a row is
failed as poison (its job quarantined), not delivered again."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import trio

from shardsched.core.errors import ShardschedError
from shardsched.core.pacing import Backoff
from shardsched.runtime.metrics import Metrics
from shardsched.shard.maintenance import MAINTENANCE_EVERY_S
from shardsched.shard.waker import Waker
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.lua import recovery
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)

#: The longest the owner goes without a reclaim round (lua/claim.lua tells of sooner ones).
RECLAIM_MAX_WAIT_S = 10.0
#: The shortest pause between reclaim rounds (a deadline due this very millisecond).
RECLAIM_MIN_WAIT_S = 0.01
#: Lapses in a row after which a run is failed as poison, not delivered again.
POISON_LAPSES = 3


class Reclaimer:
    """One per node; its rounds run in one task (:meth:`run`), sooner when told."""

    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        metrics: Metrics,
        held: Callable[[], list[tuple[int, int]]],
        waker: Waker,
    ) -> None:
        self.redis, self.dep, self.metrics, self._held, self.waker = (
            redis,
            dep,
            metrics,
            held,
            waker,
        )
        self.reclaimed = 0
        self.rounds = 0
        #: the next round (trio's clock); the server's clock less trio's (ms)
        self._at = -math.inf
        self._sooner = trio.Event()
        self._server_ahead_ms: float | None = None

    def hint(self, at_ms: int) -> None:
        """A claim's lease deadline (server clock, ms) published by claim.lua."""
        if self._server_ahead_ms is None:
            self.soon(-math.inf)
        else:
            self.soon((at_ms - self._server_ahead_ms) / 1000)

    def soon(self, at: float) -> None:
        """Have the reclaim round run by ``at`` (trio's clock) at the latest."""
        if at < self._at:
            self._at = at
            self._sooner.set()

    async def run(self) -> None:
        """Take back runs whose worker lease lapsed, in every owned shard (one round trip),
        when the earliest lease deadline the owner knows of comes: reclaim.lua answers it,
        claim.lua publishes earlier ones, and a round never waits past RECLAIM_MAX_WAIT_S."""
        backoff = Backoff(first=MAINTENANCE_EVERY_S, cap=10.0)
        while True:
            while (wait := self._at - trio.current_time()) > 0:
                with trio.move_on_after(wait):
                    await self._sooner.wait()
                self._sooner = trio.Event()
            self._at = trio.current_time() + RECLAIM_MAX_WAIT_S
            try:
                await self._round()
                backoff.reset()
            except (RedisError, ShardschedError) as exc:
                pause = backoff.next()
                self.metrics.redis_error(log, "reclaim round", exc, pause)
                self._at = trio.current_time() + pause

    async def _round(self) -> None:
        held = self._held()
        calls = [
            recovery.reclaim(self.dep.shard(shard), epoch, 1000, POISON_LAPSES)
            for shard, epoch in held
        ]
        if not calls:
            return
        self.rounds += 1
        replies = await redis_calls(self.redis, calls)
        local = trio.current_time()
        for (shard, _), reply in zip(held, replies, strict=True):
            if isinstance(reply, Exception):
                log.error("reclaim on shard %d failed: %s", shard, reply)
                self.soon(local + MAINTENANCE_EVERY_S)
                continue
            done = recovery.decode_reclaimed(reply)
            if done is None:
                continue  # the lease is gone: the manager's renewal round notices
            self._server_ahead_ms = done.now_ms - local * 1000
            if done.next_ms is not None:
                wait = max((done.next_ms - done.now_ms) / 1000, RECLAIM_MIN_WAIT_S)
                self.soon(local + wait)
            if done.requeued:
                self.waker.wake(shard, done.queues)
            if done.reclaimed or done.poisoned:
                self.reclaimed += done.reclaimed
                self.metrics.lease_reclaims.inc(done.reclaimed)
                self.metrics.poisoned.inc(done.poisoned)
                log.warning(
                    "shard %d: %d runs reclaimed after their lease lapsed, %d failed as poison"
                    " (their jobs quarantined)",
                    shard,
                    done.reclaimed,
                    done.poisoned,
                    extra={"shard": shard, "epoch": dict(held).get(shard)},
                )
