"""An event's way from receipt to its one outcome, as a sequence of calls: stored in its
own shard before it is acknowledged, delivered to every job that listens to its name and
whose filter it passes, its outcome settled once; and an event read back.

The receiver (the router, for ``POST /api/v1/events/{name}`` and a hook) runs it all;
the owner of the event's shard runs :func:`deliver` again for an event still pending
after ``PENDING_GRACE_S`` (its receiver died between the two). Delivering twice is safe:
each delivery's key (the event's idempotency key, or its id) dedupes it on the job, and
a run made by this very event's first delivery counts as made (its ``cause``), so the
outcome both compute is the same and the first settled stays. Here in the store, beside
:mod:`.turns`, because the owner imports no operation.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import Any

import msgspec

from shardsched.core.backlog import BacklogPolicy
from shardsched.core.events import (
    EVENT_KEPT_S,
    SELECTOR,
    DeliveryResult,
    EventDelivery,
    EventOutcome,
    OnRule,
    ReceivedEvent,
    Rerun,
    ends_as,
    outcome_of,
    passes,
    rules_for,
    run_args,
    selects,
    upstream_of,
)
from shardsched.core.ids import attempt_of, firing_of, job_of_run
from shardsched.core.instants import from_ms
from shardsched.core.params import IDEMPOTENCY_TTL_S
from shardsched.core.queues import DEFAULT_QUEUE
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import events as lua

EVENT_ID = re.compile(r"^ev_[0-9a-f]{20}$(?!\n)")
_outcome_decoder = msgspec.json.Decoder(EventOutcome)
_outcome_encoder = msgspec.json.Encoder()


class _Listens(msgspec.Struct):
    """What a delivery reads of a job's stored spec: its rules and its backpressure."""

    on: list[OnRule] = msgspec.field(default_factory=list)
    backlog: BacklogPolicy | None = None
    queue: str = DEFAULT_QUEUE
    labels: dict[str, str] = msgspec.field(default_factory=dict)

    def backlog_code(self, defaults: dict[str, str]) -> str:
        """Its own backpressure, else its queue's default (``defaults``: by queue)."""
        return self.backlog.code() if self.backlog is not None else defaults.get(self.queue, "")


def queue_defaults(raw: Any) -> dict[str, str]:
    """Each queue's default backpressure code from an HGETALL of ``queue_backlogs``."""
    flat = check(raw)
    pairs = dict(zip(flat[::2], flat[1::2], strict=True)) if isinstance(flat, list) else flat
    return {q.decode(): _policy_decoder.decode(v).code() for q, v in pairs.items()}


_listens_decoder = msgspec.json.Decoder(_Listens)
_policy_decoder = msgspec.json.Decoder(BacklogPolicy)


def new_event_id() -> str:
    return "ev_" + secrets.token_hex(10)


def receive(
    dep: Deployment,
    event_id: str,
    name: str,
    source: str,
    key: str,
    payload: bytes,
    signed_at_s: int | None = None,
    window_ms: int = 0,
) -> Op:
    """Store the event (nothing else yet); returns (code, now_ms) as store_event.lua."""
    sk = dep.keys_for(event_id)
    call = lua.store_event(sk, event_id, name, source, key, payload, signed_at_s, window_ms)
    (reply,) = yield [call]
    code, now = check(reply)
    return int(code), int(now)


def deliver(dep: Deployment, event_id: str, name: str, key: str, payload: bytes) -> Op:
    """Deliver a stored event to the jobs that listen and settle its outcome; returns the
    outcome recorded (this one, or the one settled before)."""
    g = dep.globals
    members, now, qb = yield [
        Call(("SMEMBERS", g.listeners(name))),
        Call(("TIME",)),
        Call(("HGETALL", g.queue_backlogs)),
    ]
    defaults = queue_defaults(qb)
    job_ids = sorted(m.decode() for m in check(members))
    value: Any = msgspec.json.decode(payload) if payload else None
    stale: list[str] = []
    targets: list[tuple[str, OnRule]] = []
    codes: dict[str, str] = {}  # a target's backlog code
    if job_ids:
        reads = yield [
            Call(("HMGET", dep.keys_for(j).job(j), "spec", "status", "dag")) for j in job_ids
        ]
        for job_id, reply in zip(job_ids, reads, strict=True):
            spec_raw, status, dag = check(reply)
            if spec_raw is None or status in (None, b"deleted") or dag is not None:
                stale.append(job_id)
                continue
            listens = _listens_decoder.decode(spec_raw)
            codes[job_id] = listens.backlog_code(defaults)
            rules = rules_for(listens.on, name)
            if not rules:
                stale.append(job_id)  # it listened once: the index is trimmed here
                continue
            rule = next((r for r in rules if passes(r, value)), None)
            if rule is not None:
                targets.append((job_id, rule))
    if stale:
        yield [Call(("SREM", g.listeners(name), *stale))]
    dedupe = f"event:{name}:{key or event_id}"
    deliveries: list[EventDelivery] = []
    if targets:
        calls = []
        for job_id, rule in targets:
            try:
                args = run_args(rule, value)
            except ValueError as exc:  # a selection past the args' bound
                deliveries.append(EventDelivery(job_id, DeliveryResult.REFUSED, reason=str(exc)))
                continue
            calls.append(
                lua.deliver_to(
                    dep.keys_for(job_id), job_id, f"event:{event_id}", args, dedupe,
                    IDEMPOTENCY_TTL_S * 1000, rule.when_paused.value, rule.hold_max,
                    codes.get(job_id, ""),
                )
            )  # fmt: skip
        replies = yield calls
        wakes: list[Call] = []
        refused = {d.job_id for d in deliveries}
        for (job_id, _rule), reply in zip(
            [t for t in targets if t[0] not in refused], replies, strict=True
        ):
            delivery, woke = delivery_of(job_id, f"event:{event_id}", check(reply))
            deliveries.append(delivery)
            if woke is not None:
                wakes += ready.push(g, [dep.keys_for(job_id).shard], woke)
            for superseded in check(reply)[2:] if int(check(reply)[0]) in (3, 5) else []:
                earlier = superseded.decode().removeprefix("event:")
                why = f"superseded by {event_id} (keep_latest)"
                wakes.append(lua.note_event(dep.keys_for(earlier), earlier, job_id, "", why))
        if wakes:
            yield wakes
    outcome = outcome_of(deliveries)
    outcome.settled_at = from_ms(server_ms(check(now)))
    sk = dep.keys_for(event_id)
    raw = _outcome_encoder.encode(outcome)
    (reply,) = yield [lua.settle_event(sk, event_id, raw, EVENT_KEPT_S * 1000)]
    reply = check(reply)
    if reply[0] == 2:
        return _outcome_decoder.decode(reply[1])
    return outcome


def delivery_of(
    job_id: str, cause: str, reply: list[Any]
) -> tuple[EventDelivery, tuple[str, ...] | None]:
    """One deliver_event.lua reply as an EventDelivery, and the queues to wake (a run
    made). ``cause``: this delivery's (``event:<id>``, ``after:<run id>``)."""
    code = int(reply[0])
    if code == 1:
        run_id = reply[1].decode()
        return EventDelivery(job_id, DeliveryResult.CREATED, run_id=run_id), ready.woken(reply[3])
    if code == 2:
        first, first_cause = reply[1].decode(), reply[3].decode()
        if first_cause == cause:  # made by this very cause's earlier delivery
            return EventDelivery(job_id, DeliveryResult.CREATED, run_id=first), None
        if first == f"held:{cause}":
            return EventDelivery(job_id, DeliveryResult.HELD, reason="the job is paused"), None
        if first.startswith("held:"):
            earlier = first.removeprefix("held:").removeprefix("event:")
            return EventDelivery(
                job_id, DeliveryResult.DEDUPLICATED, first_event_id=earlier,
                reason="the earlier delivery is held: the job is paused",
            ), None  # fmt: skip
        return EventDelivery(
            job_id, DeliveryResult.DEDUPLICATED, run_id=first,
            first_event_id=first_cause.removeprefix("event:") or None,
        ), None  # fmt: skip
    if code == 3:
        return EventDelivery(job_id, DeliveryResult.HELD, reason="the job is paused"), None
    if code == 5:
        reason = "the job's runs are queued past its backlog bound"
        return EventDelivery(job_id, DeliveryResult.HELD, reason=reason), None
    if code == 4:
        why = reply[1].decode()
        reason = (
            "the job is paused and drops events"
            if why == "paused"
            else ("the job is paused and holds its most already")
        )
        return EventDelivery(job_id, DeliveryResult.DROPPED, reason=reason), None
    reason = "the job is deleted" if code == -2 else "no such job"
    return EventDelivery(job_id, DeliveryResult.REFUSED, reason=reason), None


#: How long an upstream tick's key is remembered per job (``once_per_upstream_tick``).
AFTER_KEY_TTL_S = 7 * 86400


def upstream_of_run(rid: str) -> str:
    """The job, task or DAG whose firing ``rid`` is (a DAG run id ``<dag_id>:<tick>``)."""
    job = job_of_run(rid)
    return job if attempt_of(rid) is not None else job.partition(".")[0]


def dispatch_outcomes(dep: Deployment, entries: list[bytes]) -> Op:
    """Each ended firing of outq (``run id\\nstate\\nms``) delivered to the jobs that run
    after its job (core/events.py ``after``, ``when``, ``rerun``); returns the deliveries
    made, as (upstream run id, EventDelivery)."""
    g = dep.globals
    ended = []
    for raw in entries:
        rid, state, ms = raw.decode().split("\n")
        ended.append((rid, upstream_of_run(rid), state, ms))
    ups = sorted({up for _rid, up, _s, _ms in ended})
    *members, qb = yield [
        *(Call(("SMEMBERS", g.after(up))) for up in ups),
        Call(("HGETALL", g.queue_backlogs)),
    ]
    defaults = queue_defaults(qb)
    after_of = {
        up: sorted(m.decode() for m in check(r)) for up, r in zip(ups, members, strict=True)
    }
    downs = sorted({d for ds in after_of.values() for d in ds})
    if not downs:
        return []
    deep = yield from _too_deep(dep, [rid for rid, up, _s, _ms in ended if after_of[up]])
    if deep:  # a chain that came back on itself past every check: not run again
        ended = [e for e in ended if e[0] not in deep]
    job_ups = [up for up in ups if after_of[up] and not up.startswith("dag_")]
    reads = yield [
        *(Call(("HMGET", dep.keys_for(d).job(d), "spec", "status", "dag")) for d in downs),
        *(Call(("HGET", dep.keys_for(up).job(up), "spec")) for up in job_ups),
    ]
    reads, up_specs = reads[: len(downs)], reads[len(downs) :]
    rules: dict[str, list[OnRule]] = {}
    codes: dict[str, str] = {}
    for down, reply in zip(downs, reads, strict=True):
        spec_raw, status, dag = check(reply)
        if spec_raw is not None and status not in (None, b"deleted") and dag is None:
            listens = _listens_decoder.decode(spec_raw)
            rules[down] = [r for r in listens.on if r.after]
            codes[down] = listens.backlog_code(defaults)
    labels_of = {  # what a selector (``labels:…``) is matched against
        up: _listens_decoder.decode(raw).labels if check(raw) else {}
        for up, raw in zip(job_ups, up_specs, strict=True)
    }

    def names(rule: OnRule, up: str) -> bool:
        named = upstream_of(rule.after or "")
        return named == up or (named.startswith(SELECTOR) and selects(named, labels_of.get(up, {})))

    stale = [
        Call(("SREM", g.after(up), d))
        for up, ds in after_of.items()
        for d in ds
        if not any(names(r, up) for r in rules.get(d, []))
    ]
    plan: list[tuple[str, str, Call]] = []
    for rid, up, state, ms in ended:
        for down in after_of[up]:
            rule = next(
                (r for r in rules.get(down, []) if names(r, up) and ends_as(r.when, state)),
                None,
            )  # fmt: skip
            if rule is None:
                continue
            once = rule.rerun == Rerun.ONCE_PER_UPSTREAM_TICK
            key = f"after:{firing_of(rid)}" if once else f"after:{rid}:{ms}"
            call = lua.deliver_to(
                dep.keys_for(down), down, f"after:{rid}", b"", key,
                AFTER_KEY_TTL_S * 1000, rule.when_paused.value, rule.hold_max,
                codes.get(down, ""),
            )  # fmt: skip
            plan.append((rid, down, call))
    replies = (yield [c for _r, _d, c in plan]) if plan else []
    made: list[tuple[str, EventDelivery]] = []
    wakes: list[Call] = []
    for (rid, down, _call), reply in zip(plan, replies, strict=True):
        delivery, woke = delivery_of(down, f"after:{rid}", check(reply))
        made.append((rid, delivery))
        if woke is not None:
            wakes += ready.push(g, [dep.keys_for(down).shard], woke)
    if wakes or stale:
        yield wakes + stale
    return made


#: The longest chain of runs made one after another's end: a run this many causes deep
#: makes no more (a cycle that slipped past every check would otherwise run forever).
MAX_AFTER_DEPTH = 32
_deep_log = logging.getLogger("shardsched.triggers")


def _too_deep(dep: Deployment, rids: list[str]) -> Op:
    """Of ``rids``, those whose chain of ``after`` causes is MAX_AFTER_DEPTH long: followed
    one link a round trip, for every run at once (most have no cause: one round)."""
    place = {rid: rid for rid in rids}
    for _ in range(MAX_AFTER_DEPTH):
        if not place:
            return set()
        keys = [_cause_key(dep, at) for at in place.values()]
        causes = yield [Call(("HGET", key, "cause")) for key in keys]
        place = {
            rid: cause.decode().removeprefix("after:")
            for (rid, _at), cause in zip(place.items(), causes, strict=True)
            if check(cause) is not None and cause.startswith(b"after:")
        }
    for rid in place:
        _deep_log.error(
            "%s ends a chain of %d runs each after the one before: nothing runs after it"
            " (a cycle?)", rid, MAX_AFTER_DEPTH,
        )  # fmt: skip
    return set(place)


def _cause_key(dep: Deployment, any_run: str) -> str:
    """The hash that keeps a run's (or a DAG run's) cause."""
    sk = dep.keys_for(upstream_of_run(any_run))
    return sk.run(any_run) if attempt_of(any_run) is not None else sk.dag_run(any_run)


_FIELDS = ("n", "src", "k", "p", "at", "o")


def read_event(dep: Deployment, event_id: str) -> Op:
    """The event (a ReceivedEvent), or None when there is none (or it expired)."""
    if not EVENT_ID.match(event_id):
        return None
    (raw,) = yield [Call(("HGETALL", dep.keys_for(event_id).event(event_id)))]
    return event_of(event_id, check(raw))


def event_of(event_id: str, raw: Any) -> ReceivedEvent | None:
    """A ReceivedEvent from its hash's HGETALL reply (a list or a dict), None if empty."""
    if isinstance(raw, list):
        raw = dict(zip(raw[::2], raw[1::2], strict=True))
    if not raw or b"n" not in raw:
        return None
    later = {
        f.decode().removeprefix("later:"): v.decode()
        for f, v in raw.items()
        if f.startswith(b"later:")
    }
    payload = raw.get(b"p") or b""
    return ReceivedEvent(
        event_id=event_id,
        name=raw[b"n"].decode(),
        source=raw[b"src"].decode(),
        received_at=from_ms(int(raw[b"at"])),
        payload=msgspec.json.decode(payload) if payload else None,
        idempotency_key=(raw.get(b"k") or b"").decode() or None,
        outcome=_outcome_decoder.decode(raw[b"o"]) if b"o" in raw else None,
        later=later,
    )


def redeliver(dep: Deployment, event_id: str) -> Op:
    """Deliver a stored event again from its record (the owner's, for one left pending);
    returns its outcome, or None when the event is gone."""
    sk = dep.keys_for(event_id)
    (raw,) = yield [Call(("HMGET", sk.event(event_id), "n", "k", "p", "o"))]
    name, key, payload, outcome = check(raw)
    if name is None or outcome is not None:  # gone, or settled: no longer pending
        yield [Call(("ZREM", sk.events_pending, event_id))]
        return None if outcome is None else _outcome_decoder.decode(outcome)
    op = deliver(dep, event_id, name.decode(), (key or b"").decode(), payload or b"")
    return (yield from op)
