"""Plans of events: emit one (stored, delivered to the jobs whose ``on`` listens,
answered with its one outcome) and read one back (core/events.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from shardsched.core.events import EmitRequest, ReceivedEvent
from shardsched.ops.events import received
from shardsched.sdk.plans import Handle, Plan, as_validation_error


def emit_request(payload: Any = None, idempotency_key: str | None = None) -> EmitRequest:
    """An emit's body, validated as the API validates it."""
    given = {"payload": payload, "idempotency_key": idempotency_key}
    try:
        return msgspec.convert({k: v for k, v in given.items() if v is not None}, EmitRequest)
    except msgspec.ValidationError as exc:
        raise as_validation_error(exc) from None


def emit(
    c: Handle, name: str, payload: Any = None, idempotency_key: str | None = None
) -> Plan[ReceivedEvent]:
    """Emit the event ``name``: every job whose ``on`` listens to it (and whose filter the
    payload passes) gets a run, unless ``idempotency_key`` came to that job within a day
    (then the earlier run). Returns the event with its one outcome."""
    request = emit_request(payload, idempotency_key)
    return Plan(received.emit(c.deployment, name, request, f"api:{c.actor}"))


def get_event(c: Handle, event_id: str) -> Plan[ReceivedEvent]:
    """An event received (emitted or by a hook), with its outcome; EventNotFound when
    there is none (or it expired, a week after it was settled)."""
    return Plan(received.get_event(c.deployment, event_id))
