"""The schedule preview operation: :func:`shardsched.core.preview.preview` from now on the
Redis server's clock (the one clock)."""

from __future__ import annotations

from shardsched.core.models import SchedulePreviewRequest
from shardsched.core.preview import preview
from shardsched.ops.schedules.calendars import require_calendars
from shardsched.store.calendars import read_book
from shardsched.store.calls import Call, Op, server_ms
from shardsched.store.deployment import Deployment


def preview_schedule(request: SchedulePreviewRequest) -> Op:
    """:func:`preview` from now on the Redis server's clock (the one clock)."""
    (now,) = yield [Call(("TIME",))]
    return preview(request, server_ms(now))


def preview_with_calendars(dep: Deployment, request: SchedulePreviewRequest) -> Op:
    """:func:`preview_schedule`, with the named calendars the request names (they must
    exist, as for a job)."""
    if request.calendars is None or not request.calendars.names():
        return (yield from preview_schedule(request))
    yield from require_calendars(dep, [request.calendars])
    book = yield from read_book(dep)
    (now,) = yield [Call(("TIME",))]
    return preview(request, server_ms(now), book)
