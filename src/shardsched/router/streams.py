"""The API's live answers: run state changes (a page, or Server-Sent Events) and a running
run's output as it is written (SSE), each polled from Redis at a short interval."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from shardsched import ops
from shardsched.core.errors import JobNotFound, RedisUnavailable
from shardsched.core.views import EventList, RunOutput
from shardsched.ops import events
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.guards import who
from shardsched.router.schemas import EventQuery, opt
from shardsched.runtime.metrics import Metrics
from shardsched.store.redis import Redis, RedisConnectionError

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


class _CountedStream(StreamingResponse):
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


_TERMINAL = {"succeeded", "failed", "dead_letter", "skipped", "cancelled"}


def sse(event: str, data: bytes, event_id: str | None = None) -> bytes:
    """One Server-Sent Event."""
    head = b"" if event_id is None else b"id: " + event_id.encode() + b"\n"
    return head + b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


class StreamHandlers(ApiBase):
    """Handlers of the event routes and the output stream."""

    def __init__(self, redis: Redis, dep: ops.Deployment, metrics: Metrics) -> None:
        super().__init__(redis, dep, metrics)
        self.streams = StreamSlots()

    async def _event_query(self, request: Request) -> EventQuery:
        """The query, and for a team's token the one job or run it may watch."""
        q: EventQuery = http.query(request, EventQuery)
        job_id, run_id = opt(q.job_id), opt(q.run_id)
        if who(request).bound:
            if job_id is None and run_id is None:
                raise http.ApiError(403, "forbidden", "a team's token reads events by job_id=")
            for any_id in (i for i in (job_id, run_id) if i is not None):
                await self._visible(request, any_id, JobNotFound(any_id))
        return q

    def _events_op(self, q: EventQuery, after: str | None, since_ms: int | None) -> ops.Op:
        return events.events_page(
            self.dep, q.limit, after, since_ms, opt(q.job_id), opt(q.run_id), opt(q.state)
        )

    async def events(self, request: Request) -> Response:
        q = await self._event_query(request)
        op = self._events_op(q, opt(q.after), http.ms(q.since))
        return http.json_response(await self._run(op))

    async def event_stream(self, request: Request) -> Response:
        """Server-Sent Events: each event as ``id: <cursor>`` and its JSON, polled every
        EVENT_POLL_S; a comment line every KEEP_ALIVE_S keeps proxies from closing an idle one."""
        q = await self._event_query(request)
        after = request.headers.get("last-event-id") or opt(q.after)
        since = http.ms(q.since)
        if after is None and since is None:
            since = await self.redis.time_ms()  # live: from now on
        page: EventList = await self._run(self._events_op(q, after, since))  # 422 up front

        async def body() -> AsyncIterator[bytes]:
            nonlocal page, after
            idle = 0.0
            while True:
                for e in page.events:
                    yield sse("transition", http.encode(e), e.cursor)
                after = page.next_cursor or after
                if not page.events:
                    idle += EVENT_POLL_S
                    if idle >= KEEP_ALIVE_S:
                        idle = 0.0
                        yield b": keep-alive\n\n"
                    await trio.sleep(EVENT_POLL_S)
                try:
                    page = await self._run(self._events_op(q, after, None if after else since))
                except (http.ApiError, RedisConnectionError, RedisUnavailable):
                    return  # the client reconnects with Last-Event-ID

        return self._counted(request, body())

    def _counted(self, request: Request, body: AsyncIterator[bytes]) -> Response:
        holder = who(request).name
        self.streams.take(holder)
        return _CountedStream(body, self.streams, holder)

    async def output_stream(self, request: Request) -> Response:
        """A run's output as Server-Sent Events: ``output`` events (``{"offset", "text"}``,
        the new bytes as the worker writes them, every few seconds while it runs), then one
        ``end`` event with the run's final state and exit code. A client that fell more
        than the kept 64 KiB behind gets ``{"skipped": n}`` first."""
        rid = await self._run_id(request)
        first: RunOutput = await self._run(ops.get_output(self.dep, rid))  # 404 up front

        async def body() -> AsyncIterator[bytes]:
            sent = 0
            out, idle = first, 0.0
            while True:
                start = out.total_bytes - len(out.output.encode())
                data = out.output.encode()
                if out.total_bytes > sent:
                    if start > sent:
                        yield sse("output", http.encode({"skipped": start - sent}))
                        sent = start
                    new = data[sent - start :].decode("utf-8", "replace")
                    yield sse("output", http.encode({"offset": sent, "text": new}))
                    sent = out.total_bytes
                    idle = 0.0
                if out.state in _TERMINAL:
                    run = await self._run(ops.get_run(self.dep, rid))
                    end = {"state": run.state, "exit_code": run.exit_code, "reason": run.reason}
                    yield sse("end", http.encode(end))
                    return
                idle += EVENT_POLL_S
                if idle >= KEEP_ALIVE_S:
                    idle = 0.0
                    yield b": keep-alive\n\n"
                await trio.sleep(EVENT_POLL_S)
                try:
                    out = await self._run(ops.get_output(self.dep, rid))
                except (http.ApiError, RedisConnectionError, RedisUnavailable):
                    return  # the client asks again

        return self._counted(request, body())
