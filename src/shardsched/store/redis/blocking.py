"""A blocking pop on a connection of its own.

A worker waits for work with ``BLPOP`` (store/ready.py). A blocked connection must not hold
one of the pool's connections, and many workers may share one pool (the fleet bench runs
hundreds in a process), so each waiter owns one connection. Cancelling a pop closes it: the
reply that would have come is never read from a reused connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import hiredis
import trio

from shardsched.store.redis.connection import Commands, Connection, RedisURL
from shardsched.store.redis.errors import RedisConnectionError, reply_error

#: How long past its own timeout a BLPOP's answer is waited for.
_GRACE_S = 2.0


class BlockingPop:
    """``BLPOP key… timeout`` for one task, reconnecting after a loss (RedisError raised).
    The keys share one hash slot; Redis pops from the first non-empty one, in their order.
    ``locate`` answers the server that holds them (asked again at each connect)."""

    def __init__(
        self,
        keys: tuple[str, ...],
        locate: Callable[[], Awaitable[RedisURL]],
        connect_timeout: float = 5.0,
        track: Callable[[Connection], None] = lambda conn: None,
    ) -> None:
        self.keys = keys
        self._locate = locate
        self._track = track
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
            self._track(self._conn)
            self.connects += 1
        conn = self._conn
        with trio.move_on_after(timeout_s + _GRACE_S):
            (reply,) = await conn.execute_many([("BLPOP", *self.keys, f"{timeout_s:g}")])
            return await self._answer(reply)
        await self.aclose()  # a server that does not answer (stopped, cut off): locate again
        raise RedisConnectionError(f"no answer to BLPOP within {timeout_s + _GRACE_S:g} s")

    async def _answer(self, reply: Any) -> tuple[str, bytes] | None:
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
    return BlockingPop(keys, partial(redis.url_of_key, keys[0]), track=redis.track)
