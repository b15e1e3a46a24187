"""The owners' sweep of concurrency keys (core/concurrency.py), a part of each node's
once-a-second maintenance: each key runs wait on is looked at by the owner of the shard
its name hashes to (store/keys.py ``sweeper_shard``), with lua/ck_sweep.lua.

The sweep is what makes waiting safe against crashes and time: a hold whose worker died
is dropped when its lease would have lapsed, a granted run whose put-back was lost with
its process is put back again, and a rate limit's interval passing grants the next runs
when no run ends to do it. A key nothing waits on or holds leaves the list; a worker adds
it again before it parks a run on it.
"""

from __future__ import annotations

import logging

from shardsched.core.errors import ShardschedError
from shardsched.runtime.metrics import Metrics
from shardsched.store import ready
from shardsched.store.deployment import Deployment
from shardsched.store.drive import drive_async, redis_calls
from shardsched.store.lua import concurrency as lua
from shardsched.store.redis import Redis
from shardsched.store.turns import give_turns

log = logging.getLogger(__name__)


async def sweep_keys(redis: Redis, dep: Deployment, shards: set[int], metrics: Metrics) -> int:
    """Sweep the keys runs wait on whose sweeper shard is in ``shards`` (those this node
    owns); returns how many runs it gave their turn. Raises RedisError."""
    g = dep.globals
    (members,) = await redis.pipeline([("SMEMBERS", g.waiting_keys)])
    keys = sorted(m.decode() for m in members if dep.sweeper_of(m.decode()) in shards)
    if not keys:
        return 0
    replies = await redis_calls(redis, [lua.ck_sweep(dep.concurrency(k)) for k in keys])
    given = 0
    idle: list[str] = []
    for key, reply in zip(keys, replies, strict=True):
        if isinstance(reply, Exception):
            log.error("sweep of concurrency key %s failed: %s", key, reply)
            continue
        swept = lua.decode_swept(reply)
        label = metrics.key_label(key)
        metrics.key_waiting.labels(label).set(swept.waiting)
        metrics.key_holding.labels(label).set(swept.holding)
        wait_s = (swept.now_ms - swept.oldest_ms) / 1000 if swept.oldest_ms else 0.0
        metrics.key_wait.labels(label).set(max(wait_s, 0.0))
        if swept.turns:
            given += len(swept.turns)
            try:
                wakes = await drive_async(give_turns(dep, key, swept.turns), redis)
                await redis_calls(redis, ready.push_wakes(g, wakes))
            except ShardschedError as exc:  # the next sweep puts them back again
                log.error("turns on concurrency key %s not given: %s", key, exc)
        elif not swept.waiting and not swept.holding:
            idle.append(key)
    if idle:
        await _forget(redis, dep, idle)
    return given


async def _forget(redis: Redis, dep: Deployment, keys: list[str]) -> None:
    """Take idle keys off the list, then look once more: a worker may have listed one and
    parked a run on it between the sweep and the removal, and it goes back on."""
    g = dep.globals
    await redis.pipeline([("SREM", g.waiting_keys, *keys)])
    replies = await redis_calls(redis, [lua.ck_sweep(dep.concurrency(k)) for k in keys])
    busy = [k for k, r in zip(keys, replies, strict=True) if _busy(r)]
    if busy:
        await redis.pipeline([("SADD", g.waiting_keys, *busy)])


def _busy(reply: object) -> bool:
    """Whether a second look found runs waiting (or granted) on a key: it stays listed."""
    if isinstance(reply, Exception):
        return True
    swept = lua.decode_swept(reply)  # type: ignore[arg-type]
    return bool(swept.waiting or swept.turns)
