"""A blocking pop on a connection of its own.

A worker waits for work with ``BLPOP`` (store/ready.py). A blocked connection must not hold
one of the pool's connections, and many workers may share one pool (the fleet bench runs
hundreds in a process), so each waiter owns one connection. Cancelling a pop closes it: the
reply that would have come is never read from a reused connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import hiredis

from shardsched.store.redis.connection import Commands, Connection, RedisURL
from shardsched.store.redis.errors import reply_error


class BlockingPop:
    """``BLPOP key… timeout`` for one task, reconnecting after a loss (RedisError raised).
    The keys share one hash slot; Redis pops from the first non-empty one, in their order.
    ``locate`` answers the server that holds them (asked again at each connect)."""

    def __init__(
        self,
        keys: tuple[str, ...],
        locate: Callable[[], Awaitable[RedisURL]],
        connect_timeout: float = 5.0,
    ) -> None:
        self.keys = keys
        self._locate = locate
        self._connect_timeout = connect_timeout
        self._conn: Connection | None = None
        #: connections opened so far: a new one means a reply may have been lost with the
        #: old (a token popped for nobody), so the caller looks at everything once
        self.connects = 0

    async def pop(self, timeout_s: float) -> tuple[str, bytes] | None:
        """(key, its head) of the first LIST with one, waiting up to ``timeout_s``; None on
        time out."""
        if self._conn is not None and self._conn.broken:
            await self.aclose()  # lost (or cancelled mid-reply): never reused
        if self._conn is None:
            url = await self._locate()
            self._conn = await Connection.open(url, self._connect_timeout, scripts=False)
            self.connects += 1
        (reply,) = await self._conn.execute_many([("BLPOP", *self.keys, f"{timeout_s:g}")])
        if isinstance(reply, hiredis.ReplyError):
            await self.aclose()  # MOVED after a failover: locate again on the next pop
            raise reply_error(reply)
        return None if reply is None else (bytes(reply[0]).decode(), bytes(reply[1]))

    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn.aclose()
            self._conn = None


def blocking_pop(redis: Commands, *keys: str) -> BlockingPop:
    """A :class:`BlockingPop` of ``keys`` (one hash slot) on the server (the cluster node,
    the primary) holding them, asked again at each connect."""
    return BlockingPop(keys, partial(redis.url_of_key, keys[0]))
