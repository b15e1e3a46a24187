"""A node's copy of each queue's default backpressure (ops/deployment/queues.py), which
its actors plan with: a job of the queue with no ``backlog`` of its own fires under its
queue's. One task owns it, reading the queues' defaults before the node fires anything
and once a second after; while Redis is unreachable the last copy stands. Actors read
:attr:`QueueBacklogs.codes`, replaced whole."""

from __future__ import annotations

import logging

import msgspec
import trio

from shardsched.core.backlog import BacklogPolicy
from shardsched.core.errors import ShardschedError
from shardsched.core.pacing import Backoff
from shardsched.runtime.metrics import Metrics
from shardsched.store.calls import Call, check
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)

QUEUE_BACKLOGS_EVERY_S = 1.0
_decoder = msgspec.json.Decoder(BacklogPolicy)


class QueueBacklogs:
    def __init__(self, redis: Redis, dep: Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics
        #: queue name -> its default as fire.lua reads it (BacklogPolicy.code)
        self.codes: dict[str, str] = {}
        self.loads = 0

    async def refresh(self) -> None:
        key = self.dep.globals.queue_backlogs
        flat = check((await redis_calls(self.redis, [Call(("HGETALL", key))]))[0])
        pairs = dict(zip(flat[::2], flat[1::2], strict=True)) if isinstance(flat, list) else flat
        codes = {}
        for queue, raw in pairs.items():
            try:
                codes[queue.decode()] = _decoder.decode(raw).code()
            except msgspec.DecodeError:  # written by hand, not by the API: ignored, said
                log.error("queue %r: its default backlog is not a policy", queue)
        self.codes = codes
        self.loads += 1

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        backoff = Backoff(first=0.1, cap=5.0)
        started = False
        while True:
            try:
                await self.refresh()
                backoff.reset()
                pause = QUEUE_BACKLOGS_EVERY_S
            except (RedisError, ShardschedError) as exc:
                pause = backoff.next()
                self.metrics.redis_error(log, "reading the queues' backlogs", exc, pause)
                if started:
                    await trio.sleep(pause)
                    continue
            if not started and self.loads:
                task_status.started()
                started = True
            await trio.sleep(pause)  # the next look: once a second
