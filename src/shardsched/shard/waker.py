"""The node's wake tokens: one task pushes them for every shard it holds (store/ready.py).

Shard actors call :meth:`Waker.wake` after fire.lua put runs on a ready stream, the
reclaim round after it sent runs back, each naming the queues that got runs; the tokens
of many shards go in one round trip. Once a second the waker also looks for streams (each
held shard's, of each of its queues) with entries no worker has read since the last look,
and pushes a token for each: a token lost with a killed worker, or a push that failed,
costs at most that long. An actor's fire call that surely puts runs on the default queue
carries that queue's token in its own write (:func:`fire_and_wake`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import trio

from shardsched.core.models import Overlap
from shardsched.runtime.metrics import Metrics
from shardsched.store import ready
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.keys import GlobalKeys
from shardsched.store.lua.firing import OVERLAP_CODE, FireItem
from shardsched.store.redis import Redis, RedisError
from shardsched.store.redis.errors import reply_error
from shardsched.store.token_pusher import TokenPusher

log = logging.getLogger(__name__)

#: How often the owner looks for shards with runs no worker has read (s).
CHECK_EVERY_S = 1.0
_ALLOW = OVERLAP_CODE[Overlap.ALLOW]


async def fire_and_wake(
    redis: Redis, g: GlobalKeys | None, shard: int, call: Call, items: Sequence[FireItem]
) -> tuple[Any, bool]:
    """The owner's fire call, with the default queue's wake token in the same write when
    one of its items surely puts a run there: a tick of a job on the default queue with
    no overlap decision to make. fire.lua skips such an item only if its job changed
    since it was planned; a token is a hint, and a worker's claim then finds nothing.

    One server runs a pipeline in order, so the token lands after the runs. A cluster's
    pipeline is not ordered across nodes, so there the token waits for the reply, as
    every other token does; ``g`` None (an actor with no waker) pushes none. In the
    steady state this saves the node a round trip per firing. Returns the fire call's
    reply (an error reply raised) and whether the token was pushed."""
    sure = (
        g is not None
        and redis.in_order
        and any(i.tick != "" and i.overlap[:1] == _ALLOW and not i.queue for i in items)
    )
    tokens = ready.push_wakes(g, [(shard, "")]) if sure and g is not None else []
    replies = await redis_calls(redis, [call, *tokens])
    if isinstance(replies[0], Exception):
        raise reply_error(replies[0])
    return replies[0], sure and not any(isinstance(r, Exception) for r in replies[1:])


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
        self._seen: dict[ready.Wake, tuple[int, bytes | None]] = {}
        self.rewoken = 0  #: tokens pushed for shards found stuck

    def wake(self, shard: int, queues: Iterable[str] = ("",)) -> None:
        """Push a token for ``shard`` onto each queue's LIST soon (with any others asked
        for meanwhile)."""
        self._pusher.wake(shard, queues)

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
        if not shards:
            self._seen = {}
            return
        queue_sets = await redis_calls(
            self.redis, [Call(("SMEMBERS", self.dep.shard(s).queues)) for s in shards]
        )
        streams: list[ready.Wake] = []
        for shard, queues in zip(shards, queue_sets, strict=True):
            streams.append((shard, ""))
            if not isinstance(queues, Exception):
                # a key's stream is looked at through its queue's ring of keys
                streams += [(shard, q.decode()) for q in sorted(queues) if b"@" not in q]
        calls: list[Call] = []
        for shard, queue in streams:
            calls += ready.undelivered(self.dep.shard(shard), queue)
        replies = await redis_calls(self.redis, calls)
        seen: dict[ready.Wake, tuple[int, bytes | None]] = {}
        for i, (shard, queue) in enumerate(streams):
            try:
                now = ready.decode_undelivered(replies[4 * i : 4 * i + 4])
            except Exception as exc:  # an error reply: this stream is looked at next time
                log.error("undelivered check on shard %d failed: %s", shard, exc)
                continue
            seen[shard, queue] = now
            if ready.stuck(now, self._seen.get((shard, queue))):
                self.rewoken += 1
                self.wake(shard, (queue,))
        self._seen = seen
