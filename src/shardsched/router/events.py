"""Run state changes: a page, or Server-Sent Events live, every stream of a process sharing
one read of Redis per interval (:mod:`.event_hub`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import trio
from starlette.requests import Request
from starlette.responses import Response

from shardsched import ops
from shardsched.core import views as v
from shardsched.core.errors import JobNotFound, RedisUnavailable, ValidationError
from shardsched.core.views import EventList
from shardsched.ops.runs import events as event_ops
from shardsched.ops.runs.events import Key
from shardsched.router import http, sse
from shardsched.router.context import Context
from shardsched.router.guards import who
from shardsched.router.operation import Operation
from shardsched.router.schemas import EventQuery, opt
from shardsched.store.redis import RedisConnectionError


async def _event_query(cx: Context, request: Request) -> EventQuery:
    """The query, and for a team's token the one job or run it may watch."""
    q: EventQuery = http.query(request, EventQuery)
    job_id, run_id = opt(q.job_id), opt(q.run_id)
    if who(request).bound:
        if job_id is None and run_id is None:
            raise http.ApiError(403, "forbidden", "a team's token reads events by job_id=")
        for any_id in (i for i in (job_id, run_id) if i is not None):
            await cx.visible(request, any_id, JobNotFound(any_id))
    return q


def _events_op(cx: Context, q: EventQuery, after: str | None, since_ms: int | None) -> ops.Op:
    return event_ops.events_page(
        cx.dep, q.limit, after, since_ms, opt(q.job_id), opt(q.run_id), opt(q.state)
    )


async def events(cx: Context, request: Request) -> Response:
    q = await _event_query(cx, request)
    op = _events_op(cx, q, opt(q.after), http.ms(q.since))
    return http.json_response(await cx.run(op))


async def event_stream(cx: Context, request: Request) -> Response:
    """Server-Sent Events: each event as ``id: <cursor>`` and its JSON; a comment line
    every sse.KEEP_ALIVE_S keeps proxies from closing an idle one. Every stream of this
    process shares one read of Redis per sse.EVENT_POLL_S (:mod:`.event_hub`)."""
    q = await _event_query(cx, request)
    after = request.headers.get("last-event-id") or opt(q.after)
    since = http.ms(q.since)
    if after is None and since is None:
        since = await cx.redis.time_ms()  # live: from now on
    try:
        parsed = event_ops.parse_cursor(after) if after else None
    except ValidationError as exc:
        raise http.validation(exc.message, exc.field) from None
    pos: Key = parsed or Key(since or 0, -1, 0, 0)
    keep = event_ops.event_filter(opt(q.job_id), opt(q.run_id), opt(q.state))

    async def body() -> AsyncIterator[bytes]:
        nonlocal pos
        idle = 0.0
        while True:
            try:
                await cx.hub.look()
                new = cx.hub.after(pos)
                if new is None:  # older than what the hub keeps: catch up on our own
                    own: EventList = await cx.run(_own_page(cx, q, pos))
                    new = own.events
                    moved = event_ops.parse_cursor(own.next_cursor) if own.next_cursor else None
                    pos = max(pos, moved or pos)
                    if len(new) < q.limit and cx.hub.after(pos) is None:
                        pos = max(pos, cx.hub.floor() or pos)  # caught up: join
            except (http.ApiError, RedisConnectionError, RedisUnavailable):
                return  # the client reconnects with Last-Event-ID
            sent = False
            for e in new:
                key = event_ops.parse_cursor(e.cursor)
                if key is not None and key > pos:
                    pos = key
                if keep(e):
                    sent = True
                    yield sse.event("transition", http.encode(e), e.cursor)
            if not sent:
                idle += sse.EVENT_POLL_S
                if idle >= sse.KEEP_ALIVE_S:
                    idle = 0.0
                    yield b": keep-alive\n\n"
            else:
                idle = 0.0
            await trio.sleep(sse.EVENT_POLL_S)

    return cx.stream(request, body())


def _own_page(cx: Context, q: EventQuery, pos: Key) -> ops.Op:
    if pos.shard < 0:
        return _events_op(cx, q, None, pos.ms)
    return _events_op(cx, q, pos.text(), None)


ROUTES: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/events",
        "Run state changes, oldest first, from the shards' event streams",
        v.EventList,
        query=EventQuery,
        errors=(422,),
        tags=("runs",),
        handler=events,
        operation_id="list_events",
    ),
    Operation(
        "get",
        "/api/v1/events/stream",
        "The same as Server-Sent Events (text/event-stream), live; resumes at Last-Event-ID",
        None,
        query=EventQuery,
        errors=(422,),
        tags=("runs",),
        handler=event_stream,
        operation_id="stream_events",
    ),
)
