"""An event emitted (a token's ``POST /api/v1/events/{name}``, the SDK's ``emit``) or
received by a signed hook: checked, stored before anything else, delivered to the jobs
that listen, its outcome answered; and events read back, one or a page.

Nothing is written for a request refused: the payload's size and JSON, the hook's
signature and key are checked first, the signed timestamp's window by the store itself
(lua/store_event.lua, on the server's clock)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from shardsched.core.errors import EventNotFound, ValidationError
from shardsched.core.events import (
    EVENT_NAME,
    PAYLOAD_MAX_BYTES,
    EmitRequest,
    EventPage,
    ReceivedEvent,
    field_at,
)
from shardsched.core.hooks import (
    REPLAY_WINDOW_S,
    SIGNATURE_HEADER,
    hook_event,
    signature_key,
    verify,
)
from shardsched.core.params import IdempotencyKey
from shardsched.core.validation import MAX_JSON_DEPTH, nests_deeper
from shardsched.ops.events.hooks import read_hook
from shardsched.store import event_delivery
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment

_key_decoder = msgspec.json.Decoder(IdempotencyKey)


class StaleSignature(ValueError):
    """A signed request whose timestamp is not within REPLAY_WINDOW_S of the server's
    clock: a replay, or a sender's clock far off."""


def emit(dep: Deployment, name: str, request: EmitRequest, source: str) -> Op:
    """Store the event, deliver it, answer it with its outcome (a ReceivedEvent)."""
    if not EVENT_NAME.match(name):
        raise ValidationError(
            "an event's name is 1 to 128 letters, digits, '.', '_', ':' and '-'", "$.event"
        )
    _finite(request.payload)
    payload = msgspec.json.encode(request.payload) if request.payload is not None else b""
    if len(payload) > PAYLOAD_MAX_BYTES:
        raise ValidationError(
            f"the payload is {len(payload)} bytes as JSON, more than {PAYLOAD_MAX_BYTES}",
            "$.payload",
        )
    return (yield from _take(dep, name, source, request.idempotency_key or "", payload, None))


def _finite(value: Any, path: str = "$.payload") -> None:
    """JSON has no NaN or infinity: an SDK caller's float('nan') is refused, not stored as
    null."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(f"{value} is not a JSON number", path)
    if isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite(v, f"{path}[{i}]")


def receive_hook(dep: Deployment, hook: str, headers: Mapping[str, str], body: bytes) -> Op:
    """A hook's request: its signature checked against the hook's secrets (SignatureError),
    its body JSON (ValidationError), its key found, then stored and delivered as the
    hook's event (StaleSignature: outside the window, nothing written)."""
    spec = yield from read_hook(dep, hook)
    header = headers.get(SIGNATURE_HEADER)
    signed = verify(spec.secrets, header, body)
    if nests_deeper(body, MAX_JSON_DEPTH):  # what every body is held to (router/http.py)
        raise ValidationError(
            f"the body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels", "$"
        )
    try:
        value: Any = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise ValidationError(f"the body is not JSON: {exc}", "$") from None
    key = _hook_key(spec.idempotency_header, spec.idempotency_field, headers, value)
    payload = msgspec.json.encode(value)  # as stored: one line of JSON
    key = key if key is not None else signature_key(signed, body)
    signed_at = int(signed)
    event = hook_event(hook, spec)
    return (yield from _take(dep, event, f"hook:{hook}", key, payload, signed_at))


def _hook_key(
    header: str | None, field: str | None, headers: Mapping[str, str], value: Any
) -> str | None:
    """The request's idempotency key where the hook says it is (None: it says nowhere)."""
    if header is not None:
        raw = headers.get(header.lower())
        if raw is None:
            raise ValidationError(f"the request has no {header} header, its idempotency key")
        return _checked_key(raw, f"the {header} header")
    if field is not None:
        found = field_at(value, field)
        if not isinstance(found, str | int) or isinstance(found, bool):
            raise ValidationError(
                f"the payload has no text or integer at {field}, its idempotency key", "$"
            )
        return _checked_key(str(found), f"the payload's {field}")
    return None


def _checked_key(raw: str, where: str) -> str:
    try:
        key: str = _key_decoder.decode(msgspec.json.encode(raw))
    except msgspec.ValidationError:
        raise ValidationError(
            f"{where} is not an idempotency key (1 to 200 printable characters, no space)"
        ) from None
    return key


def _take(
    dep: Deployment, name: str, source: str, key: str, payload: bytes, signed_at: int | None
) -> Op:
    event_id = event_delivery.new_event_id()
    op = event_delivery.receive(
        dep, event_id, name, source, key, payload, signed_at, REPLAY_WINDOW_S * 1000
    )
    code, _now = yield from op
    if code == -1:
        raise StaleSignature(
            f"the signature's timestamp is more than {REPLAY_WINDOW_S} s from the server's"
            " clock: a replay, or the sender's clock is off"
        )
    if code != 1:  # a random id taken: never in practice; say so rather than guess
        raise RuntimeError(f"event id {event_id} is taken")
    yield from event_delivery.deliver(dep, event_id, name, key, payload)
    return (yield from get_event(dep, event_id))


def get_event(dep: Deployment, event_id: str) -> Op:
    event = yield from event_delivery.read_event(dep, event_id)
    if event is None:
        raise EventNotFound(event_id)
    return event


Place = tuple[int, str]  #: an event's place in the log: (received ms, event id)


def list_received(
    dep: Deployment, limit: int = 50, before: str | None = None, name: str | None = None
) -> Op:
    """The newest events received (across shards), newest first (by received ms, then
    id), from the place ``before`` (a page's ``next_cursor``: ``<ms>:<event id>``, or
    ``<ms>``) on; ``name`` keeps one event's only. Events received in one millisecond
    are never split from a page's edge and lost (the tester saw a cursor of the
    millisecond alone skip them)."""
    place: Place | None = _place(before)
    events: list[ReceivedEvent] = []
    while len(events) < limit:
        window = yield from _below(dep, place, limit)
        if not window:
            return EventPage(events=events, next_cursor=None)
        raws = yield [Call(("HGETALL", dep.keys_for(i).event(i))) for _ms, i in window]
        for (ms, event_id), raw in zip(window, raws, strict=True):
            place = (ms, event_id)
            event = event_delivery.event_of(event_id, check(raw))
            if event is not None and (name is None or event.name == name):
                events.append(event)
                if len(events) == limit:
                    break
    assert place is not None
    return EventPage(events=events, next_cursor=f"{place[0]}:{place[1]}")


def _place(cursor: str | None) -> Place | None:
    if not cursor:
        return None
    ms, _, event_id = cursor.partition(":")
    if not ms.isdigit():
        raise ValidationError("a cursor is <ms>:<event id> (a page's next_cursor)", "$.before")
    return int(ms), event_id or "~"  # <ms> alone: every event of that ms is before it


def _below(dep: Deployment, place: Place | None, count: int) -> Op:
    """The places next below ``place`` across every shard, newest first, at most
    ``count``: each shard's are read from the place's millisecond down (inclusive), those
    at or above the place dropped, read on while a shard's whole window was dropped.
    Only what no unread entry can come before is answered: below the lowest entry of a
    shard whose window was full, another of its entries may come first (the tester's
    paging lost one of 90 so)."""
    hi = "+inf" if place is None else str(place[0])
    found: list[Place] = []
    floor: Place | None = None  # what is answered is at or above it
    offsets = dict.fromkeys(range(dep.n_shards), 0)
    while offsets:
        replies = yield [
            Call(("ZRANGE", dep.shard(s).event_log, hi, "-inf", "BYSCORE", "REV", "LIMIT",
                  offset, count, "WITHSCORES"))
            for s, offset in offsets.items()
        ]  # fmt: skip
        again = {}
        for (s, offset), reply in zip(offsets.items(), replies, strict=True):
            flat = check(reply)
            got = [(int(float(flat[i + 1])), flat[i].decode()) for i in range(0, len(flat), 2)]
            kept = [p for p in got if place is None or p < place]
            found += kept
            if len(got) == count and not kept:  # all of one millisecond above the place
                again[s] = offset + count
            elif len(got) == count and (floor is None or got[-1] > floor):
                floor = got[-1]  # this shard may have more just below its window
        offsets = again
    found.sort(reverse=True)
    return [p for p in found if floor is None or p >= floor][:count]


def unsettled(dep: Deployment, older_than_ms: int) -> Op:
    """Events stored before ``older_than_ms`` (server ms) with no outcome yet, by shard:
    what the audit counts as a failure."""
    replies = yield [
        Call(("ZCOUNT", dep.shard(s).events_pending, "-inf", f"({older_than_ms}"))
        for s in range(dep.n_shards)
    ]
    return {s: int(check(r)) for s, r in enumerate(replies) if check(r)}
