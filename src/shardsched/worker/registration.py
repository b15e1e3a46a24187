"""A worker's entry in the deployment's registry of workers (``workers``, ZSET by expiry,
and ``worker_info``, its :class:`~shardsched.store.records.WorkerInfo`): what ``status``,
the console's Fleet and the metrics read of it. Written at start, then every heartbeat
with a time to live of three heartbeats, so a worker that dies drops out by itself, and
removed when it leaves."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import msgspec
import trio

from shardsched.runtime.metrics import Metrics
from shardsched.store.deployment import Deployment
from shardsched.store.drive import call_script
from shardsched.store.lua import leases
from shardsched.store.records import WorkerInfo
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)


class Registration:
    """``info`` says what the worker is now (its ``started_ms`` is filled in here);
    ``every_fifth`` runs every fifth heartbeat (the worker learns the queues' bands)."""

    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str,
        every_s: float,
        metrics: Metrics,
        info: Callable[[], WorkerInfo],
        every_fifth: Callable[[], Awaitable[None]],
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.worker_id = worker_id
        self.every_s = every_s
        self.metrics = metrics
        self.info = info
        self.every_fifth = every_fifth
        self.registered_ms = 0  #: the server's clock at its first heartbeat

    async def beat(self) -> None:
        """One heartbeat: the entry and its info, with a time to live of three."""
        g = self.dep.globals
        info = msgspec.structs.replace(self.info(), started_ms=self.registered_ms)
        ttl = round(self.every_s * 3000)
        payload = msgspec.json.encode(info)
        call = leases.heartbeat(
            g.workers, g.worker_info, self.worker_id, ttl, payload, answer=False
        )
        now_ms, _members = leases.decode_heartbeat(await call_script(self.redis, call))
        if not self.registered_ms:
            self.registered_ms = now_ms

    async def first(self) -> None:
        """Registered when ready, if Redis lets it (else at the next heartbeat)."""
        try:
            await self.beat()
        except RedisError as exc:
            self.metrics.redis_error(log, "worker heartbeat", exc, self.every_s)

    async def run(self) -> None:
        """A heartbeat every ``every_s`` until cancelled; Redis trouble waits for the next."""
        beats = 0
        while True:
            await trio.sleep(self.every_s)  # the heartbeat's period
            try:
                await self.beat()
            except RedisError as exc:
                self.metrics.redis_error(log, "worker heartbeat", exc, self.every_s)
            beats += 1
            if beats % 5 == 0:  # a band a job named since (its tokens told us already)
                await self.every_fifth()

    async def leave(self) -> None:
        """Out of the registry now (else its entry lapses by itself)."""
        g = self.dep.globals
        try:
            await self.redis.pipeline(
                [("ZREM", g.workers, self.worker_id), ("HDEL", g.worker_info, self.worker_id)]
            )
        except RedisError:
            pass  # the registration lapses by itself
