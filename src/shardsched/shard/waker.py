"""The node's wake tokens: one task pushes them for every shard it holds (store/ready.py).

Shard actors call :meth:`Waker.wake` after fire.lua put runs on the ready stream, the
reclaim round after it sent runs back; the tokens of many shards go in one round trip.
Once a second the waker also looks for shards whose stream has entries no worker has read
since the last look, and pushes a token for each: a token lost with a killed worker, or a
push that failed, costs at most that long.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from shardsched.runtime.metrics import Metrics
from shardsched.store import ready
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.redis import Redis, RedisError
from shardsched.store.token_pusher import TokenPusher

log = logging.getLogger(__name__)

#: How often the owner looks for shards with runs no worker has read (s).
CHECK_EVERY_S = 1.0


class Waker:
    """One task per node; ``held`` answers the shards it holds now."""

    def __init__(
        self, redis: Redis, dep: Deployment, metrics: Metrics, held: Callable[[], list[int]]
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics
        self.held = held
        self._pusher = TokenPusher(
            redis,
            dep.globals,
            lambda exc, pause: metrics.redis_error(log, "pushing wake tokens", exc, pause),
        )
        self._seen: dict[int, tuple[int, bytes | None]] = {}
        self.rewoken = 0  #: tokens pushed for shards found stuck

    def wake(self, shard: int) -> None:
        """Push a token for ``shard`` soon (with any others asked for meanwhile)."""
        self._pusher.wake(shard)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pusher.run, name="wake-tokens")
            nursery.start_soon(self._check_loop, name="wake-check")

    async def _check_loop(self) -> None:
        while True:
            await trio.sleep(CHECK_EVERY_S)
            try:
                await self._check()
            except RedisError as exc:
                self.metrics.redis_error(log, "looking for undelivered runs", exc, 0)

    async def _check(self) -> None:
        shards = self.held()
        calls: list[Call] = []
        for shard in shards:
            calls += ready.undelivered(self.dep.shard(shard))
        replies = await redis_calls(self.redis, calls) if calls else []
        seen: dict[int, tuple[int, bytes | None]] = {}
        for i, shard in enumerate(shards):
            try:
                now = ready.decode_undelivered(replies[2 * i : 2 * i + 2])
            except Exception as exc:  # an error reply: this shard is looked at next time
                log.error("undelivered check on shard %d failed: %s", shard, exc)
                continue
            seen[shard] = now
            if ready.stuck(now, self._seen.get(shard)):
                self.rewoken += 1
                self.wake(shard)
        self._seen = seen
