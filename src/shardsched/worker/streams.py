"""Which ready streams a worker reads, and in which order (core/queues.py): its queues in
each band, the highest band first, with the share of the lower bands every tenth claim.

A band's stream is read once some job named it (the shards' sets of queues, read at
start, after a reconnect and every few heartbeats), or a wake token of it came: a
deployment without priorities claims from one stream per queue, as before."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from shardsched.core.queues import claim_plan, plain, streams
from shardsched.core.queues import stored as stored_queue
from shardsched.runtime.metrics import Metrics
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)


class Streams:
    """The worker's streams; state of its claim loop's task."""

    def __init__(self, queues: Sequence[str]) -> None:
        self.queues = tuple(queues)
        bands = (stored_queue(q) + band for q in self.queues for band in ("^h", "^l"))
        #: every stream it may read (pending runs are looked for on all of them)
        self.all = streams(self.queues, bands)
        #: the streams it reads: each queue's normal band, and a band some job named
        self.order = streams(self.queues)
        #: shard -> claims that took runs from it: whose turn the share is
        self._turns: dict[int, int] = {}

    def plan(self, count: int, shard: int = 0) -> list[tuple[str, int]]:
        """One claim's (stream, at most) pairs on ``shard``: a claim that takes runs moves
        the shard's turn on (:meth:`took`), one that finds nothing does not."""
        return claim_plan(self.order, count, self._turns.get(shard, 0) + 1)

    def took(self, shard: int, runs: int) -> None:
        if runs:
            self._turns[shard] = self._turns.get(shard, 0) + 1

    def learn(self, stored: Iterable[str]) -> None:
        """Read these bands (stored queues) from now on, those of this worker's queues."""
        new = set(stored) - set(self.order)
        if new & set(self.all):
            self.order = streams(self.queues, set(self.order) | new)

    async def refresh(self, redis: Redis, dep: Deployment, metrics: Metrics) -> None:
        """Learn the bands the shards' jobs named (each shard's set of queues)."""
        calls = [Call(("SMEMBERS", dep.shard(s).queues)) for s in range(dep.n_shards)]
        try:
            replies = await redis_calls(redis, calls)
        except RedisError as exc:
            metrics.redis_error(log, "reading the shards' queues", exc, 0)
            return
        self.learn(plain(q.decode()) for r in replies if isinstance(r, list) for q in r)
