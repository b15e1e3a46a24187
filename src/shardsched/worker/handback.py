"""Handing runs back at once (a draining worker's, past its grace): each goes back to
``scheduled`` under a new stream entry (lua/release_runs.lua) and a worker of its queue is
woken, so another worker takes it now instead of after its lease."""

from __future__ import annotations

import logging

from shardsched.runtime.metrics import Metrics
from shardsched.store import ready
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.lua import runs as lua
from shardsched.store.redis import Redis, RedisError
from shardsched.worker.batching import by_shard, send_per_shard
from shardsched.worker.holdings import Claimed

log = logging.getLogger(__name__)


async def hand_back(
    redis: Redis, dep: Deployment, worker_id: str, held: list[Claimed], metrics: Metrics
) -> None:
    """Give ``held`` back, one call per shard; a failure leaves them to their leases (the
    owner reclaims them when those lapse)."""

    def call(shard: int, runs: list[Claimed]) -> Call:
        return lua.release_runs(dep.shard(shard), worker_id, [c.delivery for c in runs])

    groups = by_shard(held, lambda c: c.shard)
    if not groups:
        return
    try:
        sent = await send_per_shard(redis, groups, call)
    except RedisError as exc:
        metrics.redis_error(log, "drain: handing back runs", exc, 0)
        return
    replies = [(s, r) for s, _, r in sent if not isinstance(r, Exception)]
    log.warning("drain: handed back %s runs", sum(int(r[0]) for _, r in replies))
    wakes = [(s, q) for s, r in replies if int(r[0]) for q in ready.woken(r[1])]
    try:  # other workers may take them at once
        await redis_calls(redis, ready.push_wakes(dep.globals, wakes))
    except RedisError:
        pass  # the owner finds them undelivered (store/ready.py)
