"""The server's clock for the later batches of a bulk registration.

Each batch of ``add_jobs`` plans its jobs' first fires from the server's clock (DESIGN
§1: one clock, the Redis server's), which it asks with ``TIME``. With two batches in
flight a ``TIME`` waits behind the batch Redis is running, so planning and Redis would
take turns instead of working side by side. The clock is read from the server once, then
advanced by this process's monotonic clock, and read again every second; a batch's plan is
then as fresh as one asked with ``TIME`` just before it (a second's drift of a monotonic
clock is microseconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from shardsched.store.calls import Call, server_ms

#: how long one reading of the server's clock stands for it
FRESH_S = 1.0


class ServerClock:
    """Answers a round that asks only ``TIME`` from the last reading, once there is one."""

    def __init__(self, fresh_s: float = FRESH_S) -> None:
        self._fresh_s = fresh_s
        self._read: tuple[int, float] | None = None  # (server ms, monotonic s) when read

    def answer(
        self, calls: Sequence[Call], execute: Callable[[Sequence[Call]], list[Any]]
    ) -> list[Any]:
        """The replies to ``calls``: from the reading for a lone ``TIME``, when one is fresh;
        otherwise ``execute``'s (and a ``TIME`` among them is the new reading)."""
        asks_time = len(calls) == 1 and calls[0].script is None and calls[0].args == ("TIME",)
        now = time.monotonic()
        if asks_time and self._read is not None and now - self._read[1] < self._fresh_s:
            ms = self._read[0] + int((now - self._read[1]) * 1000)
            return [[str(ms // 1000).encode(), str(ms % 1000 * 1000).encode()]]
        replies = execute(calls)
        if asks_time:
            self._read = (server_ms(replies[0]), now)
        return replies
