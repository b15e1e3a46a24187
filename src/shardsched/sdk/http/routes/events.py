"""Routes of events (:mod:`.` says what a route is)."""

from __future__ import annotations

from typing import Any

from shardsched.core.errors import EventNotFound
from shardsched.core.events import ReceivedEvent
from shardsched.sdk.http.calls import HttpCall, segment
from shardsched.sdk.http.routes.jobs import V1
from shardsched.sdk.plans.events import emit_request


def emit(
    name: str, payload: Any = None, idempotency_key: str | None = None
) -> HttpCall[ReceivedEvent]:
    body = emit_request(payload, idempotency_key)
    path = f"{V1}/events/{segment(name, ValueError)}"
    once = idempotency_key is not None  # sent twice, the second is deduplicated
    return HttpCall("POST", path, ReceivedEvent, body=body, idempotent=once)


def get_event(event_id: str) -> HttpCall[ReceivedEvent]:
    return HttpCall("GET", f"{V1}/events/{segment(event_id, EventNotFound)}", ReceivedEvent)
