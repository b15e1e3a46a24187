"""The loop of an owner's periodic chores (maintenance, the event follower): a round every
few tenths of a second, forever, where a Redis error (or a refusal the store raises) is
weather: counted, logged, and waited out with capped backoff, never the end of the task."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from shardsched.core.errors import ShardschedError
from shardsched.core.pacing import Backoff
from shardsched.runtime.metrics import Metrics
from shardsched.store.redis import RedisError


async def every(
    interval_s: float,
    one_round: Callable[[], Awaitable[None]],
    *,
    what: str,
    metrics: Metrics,
    log: logging.Logger,
) -> NoReturn:
    """Run ``one_round`` every ``interval_s``; after a failed one wait longer (doubling
    from ``interval_s`` up to 10 s) until one succeeds."""
    backoff = Backoff(first=interval_s, cap=10.0)
    while True:
        await trio.sleep(interval_s)
        try:
            await one_round()
            backoff.reset()
        except (RedisError, ShardschedError) as exc:
            pause = backoff.next()
            metrics.redis_error(log, what, exc, pause)
            await trio.sleep(pause)
