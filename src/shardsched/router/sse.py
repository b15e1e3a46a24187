"""Server-Sent Events: one event's bytes, the slots that cap open streams per token and in
all, and a response that gives its slot back however it ends. The live routes (events,
a run's output) poll Redis every :data:`EVENT_POLL_S`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse

from shardsched.router import http

#: How often a Server-Sent Events stream looks for new events, or new output.
EVENT_POLL_S = 0.25
#: A comment line this often keeps proxies from closing an idle stream.
KEEP_ALIVE_S = 15.0
_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
#: Streams open at once per token and in all (below the in-flight request cap, which
#: every open stream also counts against): one client cannot take every slot.
STREAMS_PER_TOKEN = 16
STREAMS_TOTAL = 128


class StreamSlots:
    """Who holds how many open streams; one per app (the event loop's, no lock needed)."""

    def __init__(self) -> None:
        self.per_token, self.total = STREAMS_PER_TOKEN, STREAMS_TOTAL
        self.held: dict[str, int] = {}

    def take(self, holder: str) -> None:
        """Count one more stream of ``holder``; a 429 when it or everyone is at the cap."""
        if sum(self.held.values()) >= self.total:
            raise http.ApiError(
                429, "too_many_streams", f"{self.total} streams are open on this server",
                {"limit": self.total},
            )  # fmt: skip
        if self.held.get(holder, 0) >= self.per_token:
            raise http.ApiError(
                429, "too_many_streams", f"this token has {self.per_token} streams open",
                {"limit": self.per_token},
            )  # fmt: skip
        self.held[holder] = self.held.get(holder, 0) + 1

    def give_back(self, holder: str) -> None:
        left = self.held.get(holder, 0) - 1
        if left > 0:
            self.held[holder] = left
        else:
            self.held.pop(holder, None)


class CountedStream(StreamingResponse):
    """A stream whose slot is given back when it ends, however it ends (the client went,
    the run ended, the server stops): the response's own call is the stream's life."""

    def __init__(self, body: AsyncIterator[bytes], slots: StreamSlots, holder: str) -> None:
        super().__init__(body, media_type="text/event-stream", headers=_SSE_HEADERS)
        self._slots, self._holder = slots, holder

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slots.give_back(self._holder)


def event(name: str, data: bytes, event_id: str | None = None) -> bytes:
    """One Server-Sent Event."""
    head = b"" if event_id is None else b"id: " + event_id.encode() + b"\n"
    return head + b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"
