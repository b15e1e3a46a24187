"""One script call per shard: what a worker sends for many runs (renewals, live output,
completions, hand-backs) is grouped by shard, every group goes in one round trip, and
each group comes back paired with its reply (an error reply as a value: one shard's
trouble is that shard's)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from shardsched.store.calls import Call
from shardsched.store.drive import redis_calls
from shardsched.store.redis import Redis

T = TypeVar("T")


def by_shard(
    items: Iterable[T], shard_of: Callable[[T], int], chunk: int | None = None
) -> list[tuple[int, list[T]]]:
    """``items`` grouped by shard, in the order each shard first appears; a group longer
    than ``chunk`` is cut into several."""
    groups: dict[int, list[T]] = {}
    for item in items:
        groups.setdefault(shard_of(item), []).append(item)
    if chunk is None:
        return list(groups.items())
    return [
        (shard, group[i : i + chunk])
        for shard, group in groups.items()
        for i in range(0, len(group), chunk)
    ]


async def send_per_shard(
    redis: Redis,
    groups: list[tuple[int, list[T]]],
    call_for: Callable[[int, list[T]], Call],
) -> list[tuple[int, list[T], Any]]:
    """One call per group, all in one round trip: (shard, group, reply) each. A lost
    connection raises RedisError; an error reply is that group's reply."""
    if not groups:
        return []
    replies = await redis_calls(redis, [call_for(shard, group) for shard, group in groups])
    return [(shard, group, reply) for (shard, group), reply in zip(groups, replies, strict=True)]
