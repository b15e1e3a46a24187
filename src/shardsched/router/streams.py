"""The API's live answers: run state changes (a page, or Server-Sent Events, all of a
process's streams sharing one read per interval: :mod:`.event_hub`) and a running run's
output as it is written (SSE), each polled from Redis at a short interval."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from shardsched import ops
from shardsched.core.errors import JobNotFound, RedisUnavailable, ValidationError
from shardsched.core.views import EventList, RunOutput
from shardsched.ops import events
from shardsched.ops.events import Key
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.event_hub import EventHub
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
        self.hub = EventHub(dep, self._run, lambda: self.redis.time_ms(), EVENT_POLL_S)

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
        """Server-Sent Events: each event as ``id: <cursor>`` and its JSON; a comment line
        every KEEP_ALIVE_S keeps proxies from closing an idle one. Every stream of this
        process shares one read of Redis per EVENT_POLL_S (:mod:`.event_hub`)."""
        q = await self._event_query(request)
        after = request.headers.get("last-event-id") or opt(q.after)
        since = http.ms(q.since)
        if after is None and since is None:
            since = await self.redis.time_ms()  # live: from now on
        try:
            parsed = events.parse_cursor(after) if after else None
        except ValidationError as exc:
            raise http.validation(exc.message, exc.field) from None
        pos: Key = parsed or Key(since or 0, -1, 0, 0)
        keep = events.event_filter(opt(q.job_id), opt(q.run_id), opt(q.state))

        async def body() -> AsyncIterator[bytes]:
            nonlocal pos
            idle = 0.0
            while True:
                try:
                    await self.hub.look()
                    new = self.hub.after(pos)
                    if new is None:  # older than what the hub keeps: catch up on our own
                        own: EventList = await self._run(self._own_page(q, pos))
                        new = own.events
                        moved = events.parse_cursor(own.next_cursor) if own.next_cursor else None
                        pos = max(pos, moved or pos)
                        if len(new) < q.limit and self.hub.after(pos) is None:
                            pos = max(pos, self.hub.floor() or pos)  # caught up: join
                except (http.ApiError, RedisConnectionError, RedisUnavailable):
                    return  # the client reconnects with Last-Event-ID
                sent = False
                for e in new:
                    key = events.parse_cursor(e.cursor)
                    if key is not None and key > pos:
                        pos = key
                    if keep(e):
                        sent = True
                        yield sse("transition", http.encode(e), e.cursor)
                if not sent:
                    idle += EVENT_POLL_S
                    if idle >= KEEP_ALIVE_S:
                        idle = 0.0
                        yield b": keep-alive\n\n"
                else:
                    idle = 0.0
                await trio.sleep(EVENT_POLL_S)

        return self._counted(request, body())

    def _own_page(self, q: EventQuery, pos: Key) -> ops.Op:
        if pos.shard < 0:
            return self._events_op(q, None, pos.ms)
        return self._events_op(q, pos.text(), None)

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
