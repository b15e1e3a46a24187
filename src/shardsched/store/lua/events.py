"""Wrappers of the event scripts: an event stored before it is acknowledged, delivered to
a job that listens, its one outcome settled, held deliveries released, what became of a
held one noted (core/events.py; the sequence is store/event_delivery.py)."""

from __future__ import annotations

from shardsched.store.calls import Call
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import signature

STORE_EVENT = signature(
    "store_event",
    keys=("event", "pending", "log"),
    argv=("event id", "name", "source", "key", "payload", "signed at", "window ms"),
)


def store_event(
    sk: ShardKeys,
    event_id: str,
    name: str,
    source: str,
    key: str,
    payload: bytes,
    signed_at_s: int | None,
    window_ms: int,
) -> Call:
    """Reply {1, now_ms} stored; {-1, now_ms} a signed timestamp outside the window;
    {-2, now_ms} the id exists."""
    return STORE_EVENT.call(
        (sk.event(event_id), sk.events_pending, sk.event_log),
        (event_id, name, source, key, payload, "" if signed_at_s is None else signed_at_s,
         window_ms),
    )  # fmt: skip


DELIVER_EVENT = signature(
    "deliver_event",
    keys=("job", "ready"),
    argv=(
        "base", "job id", "cause", "args", "key", "key ttl", "when paused", "hold max",
        "backlog",
    ),
)  # fmt: skip


def deliver_event(
    sk: ShardKeys,
    job_id: str,
    cause: str,
    args_json: bytes,
    key: str,
    key_ttl_ms: int,
    when_paused: str,
    hold_max: int,
    backlog: str = "",
) -> Call:
    """Reply {1, run, now, queues} | {2, first, now, cause} | {3 or 5, held,
    superseded...} | {4, why} | {-1} | {-2} (lua/deliver_event.lua)."""
    return DELIVER_EVENT.call(
        (sk.job(job_id), sk.ready),
        (sk.base, job_id, cause, args_json, key, key_ttl_ms, when_paused, hold_max, backlog),
    )


DELIVER_DAG = signature(
    "deliver_dag",
    keys=("dag", "ready"),
    argv=("base", "dag id", "cause", "args", "key", "key ttl", "when paused", "hold max"),
)


def deliver_to(
    sk: ShardKeys,
    any_id: str,
    cause: str,
    args_json: bytes,
    key: str,
    key_ttl_ms: int,
    when_paused: str,
    hold_max: int,
    backlog: str = "",
) -> Call:
    """A delivery to a job (lua/deliver_event.lua) or a DAG (lua/deliver_dag.lua), by
    its id; the replies are alike (a DAG's run id is its DAG run's; a DAG's cap is its
    max_active_runs, under which its runs queue: no ``backlog``)."""
    if any_id.startswith("dag_") and "." not in any_id:
        return DELIVER_DAG.call(
            (sk.job(any_id), sk.ready),
            (sk.base, any_id, cause, args_json, key, key_ttl_ms, when_paused, hold_max),
        )
    return deliver_event(
        sk, any_id, cause, args_json, key, key_ttl_ms, when_paused, hold_max, backlog
    )


SETTLE_EVENT = signature(
    "settle_event", keys=("event", "pending"), argv=("event id", "outcome", "kept ms")
)


def settle_event(sk: ShardKeys, event_id: str, outcome_json: bytes, kept_ms: int) -> Call:
    """Reply {1, outcome} recorded now; {2, outcome} the one recorded before; {-1}."""
    return SETTLE_EVENT.call(
        (sk.event(event_id), sk.events_pending), (event_id, outcome_json, kept_ms)
    )


RELEASE_HELD = signature(
    "release_held", keys=("evheldjobs", "epoch", "ready"), argv=("epoch", "base", "count")
)


def release_held(sk: ShardKeys, epoch: int, count: int = 100) -> Call:
    """The owner's: reply {1, [event, run, ...], [event, ...] dropped, queues} or {-1}."""
    return RELEASE_HELD.call((sk.events_held_jobs, sk.epoch, sk.ready), (epoch, sk.base, count))


NOTE_EVENT = signature("note_event", keys=("event",), argv=("job id", "run id", "why"))


def note_event(sk: ShardKeys, event_id: str, job_id: str, run_id: str, why: str = "") -> Call:
    """A held delivery's fate beside the event's outcome; reply 1, or 0 (expired)."""
    return NOTE_EVENT.call((sk.event(event_id),), (job_id, run_id, why))


TRIM_OUTCOMES = signature("trim_outcomes", keys=("outq", "epoch"), argv=("epoch", "count", "first"))


def trim_outcomes(sk: ShardKeys, epoch: int, count: int, first: bytes) -> Call:
    """The owner's: the first ``count`` outcomes dispatched; reply 1, 0 (not as read) or
    -1 (stale epoch)."""
    return TRIM_OUTCOMES.call((sk.outcomes, sk.epoch), (epoch, count, first))
