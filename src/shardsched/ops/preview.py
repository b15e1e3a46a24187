"""The schedule preview operation: :func:`shardsched.core.preview.preview` from now on the
Redis server's clock (the one clock)."""

from __future__ import annotations

from shardsched.core.models import SchedulePreviewRequest
from shardsched.core.preview import preview
from shardsched.store.calls import Call, Op, server_ms


def preview_schedule(request: SchedulePreviewRequest) -> Op:
    """:func:`preview` from now on the Redis server's clock (the one clock)."""
    (now,) = yield [Call(("TIME",))]
    return preview(request, server_ms(now))
