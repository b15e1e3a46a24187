"""A long-lived process follows the deployment's durable mode as it is stored now.

A process reads the mode once, when it opens the deployment (store/deployment.py); one
that opened it before a node wrote it (a worker started beside its nodes, or before a
node restarted with another ``--durable-replicas``) would write without waiting for the
replicas for as long as it ran. The nemesis found one: a worker started a moment before
the nodes ran the whole ten minutes without the mode, and the runs it claimed and
finished on a primary cut off from its replicas ran again after the failover (#53). So
each process reads the mode again every second (one HGET) and takes a change at once.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import trio

from shardsched.store.deployment import Deployment, Durability
from shardsched.store.redis import Redis, RedisError, use_durability

log = logging.getLogger(__name__)


def _said(d: Durability | None) -> str:
    return "off" if d is None else f"{d.replicas} replica(s), up to {d.timeout_ms} ms"


async def follow_durability(
    redis: Redis,
    dep: Deployment,
    every_s: float = 1.0,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Until cancelled: every ``every_s``, the stored mode put on ``redis`` if it changed."""
    current = dep.durable
    task_status.started()
    while True:
        await trio.sleep(every_s)  # a poll: one HGET a second, next to the work it guards
        try:
            stored = Durability.parse(await redis.execute("HGET", dep.globals.meta, "durable"))
        except (RedisError, ValueError):
            continue  # Redis away, or a value this version cannot read: keep the mode
        if stored != current:
            use_durability(redis, replace(dep, durable=stored))
            log.warning("durable mode now %s (was %s)", _said(stored), _said(current))
            current = stored
