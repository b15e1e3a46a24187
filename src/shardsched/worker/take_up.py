"""Taking up runs delivered to this worker id and never finished by it: a lost claim
reply, a restart under the same id, a claim the durable mode did not see on the replicas.

Such a run's lease was not renewed while the worker did not know it had it, so it may
have lapsed: the owner may then reclaim it at any moment and deliver it elsewhere. So
one is started only once its lease is renewed (renew_runs.lua: atomically, and only
while the run is still held by this delivery); one the owner took back first is left
to whoever it was delivered to. Started straight from the read, a nemesis run (#53)
executed seven runs twice, 0.25 s apart, on two workers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import trio

from shardsched.store.deployment import Deployment
from shardsched.store.drive import call_script, redis_calls
from shardsched.store.lua import runs as lua
from shardsched.store.redis import Redis, RedisError
from shardsched.worker.holdings import Claimed

log = logging.getLogger(__name__)


async def pending_here(
    redis: Redis,
    dep: Deployment,
    worker_id: str,
    queues: Sequence[str],
    held: Callable[[], set[str]],
) -> dict[int, list[Claimed]]:
    """Per shard, the runs pending on this worker that it does not hold (``held()``: the
    runs it holds or settled lately), each with its lease just renewed. Raises
    RedisError (the caller tries again later)."""
    calls = [lua.pending_runs(dep.shard(s), worker_id, queues=queues) for s in range(dep.n_shards)]
    out: dict[int, list[Claimed]] = {}
    for shard, reply in enumerate(await redis_calls(redis, calls)):
        if isinstance(reply, Exception):
            continue
        # not one running here, or finished with its completion on the way
        entries = [e for e in lua.decode_claimed(reply) if e.run_id not in held()]
        if entries:
            out[shard] = await _renewed(redis, dep, worker_id, shard, entries)
    return out


async def _renewed(
    redis: Redis, dep: Deployment, worker_id: str, shard: int, entries: list[lua.ClaimedEntry]
) -> list[Claimed]:
    deliveries = [lua.Delivery(e.entry_id, e.run_id, e.token) for e in entries]
    reply = await call_script(redis, lua.renew_runs(dep.shard(shard), worker_id, deliveries))
    now, local = int(reply[0]), trio.current_time()
    out = []
    for e, (code, lease) in zip(entries, lua.decode_renewed(reply), strict=True):
        if code == lua.Held.APPLIED:
            out.append(Claimed.of(shard, e._replace(lease_ms=lease, now_ms=now), local))
        else:
            log.info(
                "run %s pending on this worker was taken back first (%s)",
                e.run_id,
                code,
                extra={"run_id": e.run_id, "shard": shard},
            )
    return out


async def take_up(
    redis: Redis,
    dep: Deployment,
    worker_id: str,
    queues: Sequence[str],
    held: Callable[[], set[str]],
    admit: Callable[[int, list[Claimed]], Awaitable[list[Claimed]]],
    start: Callable[[Claimed], None],
    on_error: Callable[[RedisError], None],
) -> bool:
    """Start every run :func:`pending_here` finds (once ``admit`` lets it: its
    concurrency key); whether it could look."""
    try:
        found = await pending_here(redis, dep, worker_id, queues, held)
    except RedisError as exc:
        on_error(exc)
        return False  # the next re-subscription (or claim) tries again
    for shard, pending in found.items():
        admitted = await admit(shard, pending)
        now_held = held()  # a claim may have started one while this looked: not twice
        for c in admitted:
            if c.run_id not in now_held:
                log.warning(
                    "taking up run %s still pending on this worker",
                    c.run_id,
                    extra={"run_id": c.run_id, "shard": c.shard},
                )
                start(c)
    return True
