"""Events that trigger jobs: what a job listens to (``on``), what an event received is
and the one outcome it ends in, what a webhook is and how its signature is checked.

An event comes in by ``POST /api/v1/events/{name}`` (a token's) or by a signed hook
(``POST /api/v1/hooks/{name}``); it is stored before it is acknowledged
(lua/store_event.lua), delivered to each job that listens to its name and whose filter
it passes (lua/deliver_event.lua, its key the dedupe of that job), and its outcome is
recorded once (lua/settle_event.lua). Pure: the matching, the args a delivery gives a
run and the signature arithmetic, with no I/O.
"""

from __future__ import annotations

import enum
import re
from datetime import datetime
from typing import Annotated, Any

import msgspec

from shardsched.core.errors import EventNotFound as EventNotFound
from shardsched.core.errors import ValidationError
from shardsched.core.params import ARGS_MAX_BYTES, IdempotencyKey

#: An event's name: what jobs listen to (``cms.published``, ``orders:created``).
EVENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$(?!\n)")
EventName = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=EVENT_NAME.pattern)]
#: A field of a payload, dotted: ``post.slug`` is ``payload["post"]["slug"]``.
#: A field of a payload, dotted, up to 8 levels of 40 characters (the bounds in the
#: pattern itself, so a generator of examples writes strings that fit).
FIELD_PATH = r"^[A-Za-z0-9_$@-]{1,40}(\.[A-Za-z0-9_$@-]{1,40}){0,7}$(?!\n)"
FieldPath = Annotated[str, msgspec.Meta(pattern=FIELD_PATH)]
#: What a filter compares a field with: a value, or a list of values it may be.
Scalar = str | int | float | bool | None
FilterValue = Scalar | Annotated[list[Scalar], msgspec.Meta(max_length=100)]
#: A payload at most this long as JSON (a hook's body; an emitted event's ``payload``).
PAYLOAD_MAX_BYTES = 64 * 1024
#: How long an event is kept once settled, and held deliveries a job keeps at most.
EVENT_KEPT_S = 7 * 86400
HOLD_MAX = 1000
#: An event not settled this long after it came is the audit's failure (every event
#: ends in one outcome; its owner delivers one left pending after PENDING_GRACE_S).
PENDING_GRACE_S = 5
UNSETTLED_AFTER_S = 60


class WhenPaused(enum.StrEnum):
    """What an event does to a job that listens to it while the job is paused."""

    HOLD = "hold"  #: held, in order, up to hold_max; a run each on resume
    KEEP_LATEST = "keep_latest"  #: only the latest held; the earlier ones dropped
    DROP = "drop"  #: dropped (its outcome says so)


class When(enum.StrEnum):
    """Which of an upstream firing's outcomes run a job that runs after it."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"  #: failed for good: no attempt left, dead-lettered, poison
    FINISHED = "finished"  #: either


class Rerun(enum.StrEnum):
    """When the upstream's same tick ends again (retried, cleared, repaired)."""

    #: the job runs once per upstream tick, however often that tick ends
    ONCE_PER_UPSTREAM_TICK = "once_per_upstream_tick"
    EVERY_TIME = "every_time"  #: each time it ends as ``when`` says


#: What a job runs after: ``job:<id>``, ``task:<dag>.<task>`` (a DAG's task), ``dag:<id>``
#: (a DAG run's outcome).
#: ``labels:team=data[,k=v…]``: any job whose labels hold these (a selector).
_PAIR = r"[A-Za-z0-9][A-Za-z0-9._/-]{0,62}=[A-Za-z0-9._-]{1,100}"
AFTER = re.compile(
    rf"^(?:(job|task|dag):([A-Za-z0-9][A-Za-z0-9_.-]{{0,200}})|labels:{_PAIR}(?:,{_PAIR}){{0,7}})$(?!\n)"
)
After = Annotated[str, msgspec.Meta(min_length=5, max_length=1000, pattern=AFTER.pattern)]
SELECTOR = "labels:"


class OnRule(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One rule of a job's ``on``: either an ``event`` it listens to (run when one comes
    whose payload passes ``filter``: each dotted field equal to the value given, or to
    one of a list), or what it runs ``after`` (run when that job's, task's or DAG run's
    firing ends as ``when`` says; ``rerun`` says whether the same upstream tick ending
    again runs it again)."""

    event: EventName | None = None
    filter: Annotated[dict[FieldPath, FilterValue], msgspec.Meta(max_length=32)] = msgspec.field(
        default_factory=dict
    )
    #: the run's args: unset, the payload (an object; any other value as ``payload``);
    #: else each arg taken from the payload's dotted field (one missing: left out)
    args: Annotated[dict[str, FieldPath], msgspec.Meta(max_length=64)] | None = None
    after: After | None = None
    when: When = When.SUCCEEDED
    rerun: Rerun = Rerun.ONCE_PER_UPSTREAM_TICK
    when_paused: WhenPaused = WhenPaused.HOLD
    hold_max: Annotated[int, msgspec.Meta(ge=1, le=HOLD_MAX)] = 100


def validate_on(rules: list[OnRule], path: str = "$.on") -> None:
    """What msgspec cannot say: a rule is an event's or an upstream's, not both, and
    takes only its own kind's fields."""
    for i, rule in enumerate(rules):
        where = f"{path}[{i}]"
        if (rule.event is None) == (rule.after is None):
            raise ValidationError("a rule of `on` has either `event` or `after`", where)
        if rule.after is not None and (rule.filter or rule.args is not None):
            raise ValidationError("`filter` and `args` are an event's, not `after`'s", where)
        if rule.event is not None and (rule.when, rule.rerun) != (
            When.SUCCEEDED, Rerun.ONCE_PER_UPSTREAM_TICK
        ):  # fmt: skip
            raise ValidationError("`when` and `rerun` are `after`'s, not an event's", where)


def selector_of(after: str) -> dict[str, str] | None:
    """The labels an ``after: labels:…`` asks of a job; None for an id."""
    if not after.startswith(SELECTOR):
        return None
    pairs = (pair.partition("=") for pair in after.removeprefix(SELECTOR).split(","))
    return {k: v for k, _, v in pairs}


def selects(selector: str, labels: dict[str, str]) -> bool:
    """Whether a job with ``labels`` is one a selector (as :func:`upstream_of` writes it)
    names."""
    wanted = selector_of(selector)
    return wanted is not None and all(labels.get(k) == v for k, v in wanted.items())


def upstream_of(after: str) -> str:
    """The id an ``after`` names: a job's, a task's job id ``<dag_id>.<task>``, a DAG's
    (``dag_<id>``); a selector as itself, its pairs sorted."""
    selector = selector_of(after)
    if selector is not None:
        return SELECTOR + ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    kind, _, handle = after.partition(":")
    if kind == "job":
        return handle
    if kind == "dag":
        return handle if handle.startswith("dag_") else "dag_" + handle
    dag, _, task = handle.partition(".")
    return ("" if dag.startswith("dag_") else "dag_") + dag + "." + task


def after_order(nodes: list[tuple[str, list[str]]]) -> list[int]:
    """The order to write declarations in so each comes after the upstreams it names
    among them (``nodes``: each one's id and its upstreams' ids, a task's as its DAG's),
    the given order kept otherwise; ValidationError naming a cycle among them."""
    index = {node: i for i, (node, _ups) in enumerate(nodes)}
    order: list[int] = []
    state: dict[int, int] = {}  # 1 on the path, 2 placed

    def visit(i: int, path: list[str]) -> None:
        if state.get(i) == 2:
            return
        node, ups = nodes[i]
        if state.get(i) == 1:
            loop = [*path[path.index(node) :], node]
            raise ValidationError(f"a cycle: {' runs after '.join(loop)}", "$.on")
        state[i] = 1
        for up in ups:
            j = index.get(up)
            if j is not None:
                visit(j, [*path, node])
        state[i] = 2
        order.append(i)

    for i in range(len(nodes)):
        visit(i, [])
    return order


def ends_as(when: When, state: str) -> bool:
    """Whether an upstream ending ``s`` (succeeded) or ``f`` (failed) is a ``when``."""
    return when == When.FINISHED or (when == When.SUCCEEDED) == (state == "s")


OnRules = Annotated[list[OnRule], msgspec.Meta(max_length=32)]


class EmitRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``POST /api/v1/events/{name}``: the payload (any JSON) and a key that
    makes a second event with it a duplicate for every job (within a day)."""

    payload: Any = None
    idempotency_key: IdempotencyKey | None = None


class DeliveryResult(enum.StrEnum):
    CREATED = "created"  #: a run of the job made (``run_id``)
    DEDUPLICATED = "deduplicated"  #: its key came to the job before: that run (or hold)
    HELD = "held"  #: the job is paused: held until it resumes
    DROPPED = "dropped"  #: the job is paused and drops, or holds its most already
    REFUSED = "refused"  #: the job is deleted or gone (``reason``)


class EventDelivery(msgspec.Struct, omit_defaults=True):
    """What an event did to one job that listens to it."""

    job_id: str
    result: DeliveryResult
    run_id: str | None = None  #: the run made, or the earlier one (deduplicated)
    reason: str | None = None
    #: deduplicated: the event whose delivery made that run
    first_event_id: str | None = None


class EventResult(enum.StrEnum):
    """An event's one outcome, from its deliveries (the first that applies)."""

    RUNS = "runs"  #: at least one run made
    HELD = "held"  #: none made, at least one held
    DEDUPLICATED = "deduplicated"  #: none made or held, at least one deduplicated
    DROPPED = "dropped"  #: every listener dropped it
    REFUSED = "refused"  #: no job listens (or every one refused it)


class EventOutcome(msgspec.Struct):
    outcome: EventResult
    deliveries: list[EventDelivery] = msgspec.field(default_factory=list)
    reason: str | None = None  #: refused: why (no job listens)
    settled_at: datetime | None = None


class ReceivedEvent(msgspec.Struct):
    """An event as ``GET /api/v1/events/{id}`` answers it."""

    event_id: str
    name: str
    source: str  #: ``api:<token name>`` or ``hook:<hook name>``
    received_at: datetime
    payload: Any = None
    idempotency_key: str | None = None
    #: None until settled (the audit counts one left so past UNSETTLED_AFTER_S)
    outcome: EventOutcome | None = None
    #: a delivery held for a paused job, later: ``run:<id>`` or ``dropped:<why>``, by job
    later: dict[str, str] = msgspec.field(default_factory=dict)


class EventPage(msgspec.Struct):
    events: list[ReceivedEvent]
    next_cursor: str | None = None


def outcome_of(deliveries: list[EventDelivery]) -> EventOutcome:
    """The one outcome of an event's deliveries."""
    if not deliveries:
        return EventOutcome(
            EventResult.REFUSED,
            reason="no job listens to this event (or none whose filter it passes)",
        )
    results = {d.result for d in deliveries}
    for result, outcome in (
        (DeliveryResult.CREATED, EventResult.RUNS),
        (DeliveryResult.HELD, EventResult.HELD),
        (DeliveryResult.DEDUPLICATED, EventResult.DEDUPLICATED),
        (DeliveryResult.DROPPED, EventResult.DROPPED),
    ):
        if result in results:
            return EventOutcome(outcome, deliveries)
    return EventOutcome(EventResult.REFUSED, deliveries, reason="every job refused it")


_MISSING = object()


def field_at(payload: Any, path: str) -> Any:
    """The payload's value at a dotted path, or :data:`_MISSING`."""
    value = payload
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def passes(rule: OnRule, payload: Any) -> bool:
    """Whether the payload passes the rule's filter: each field equal to the value given
    (or to one of a list), types kept (``1`` is not ``true``)."""
    for path, wanted in rule.filter.items():
        value = field_at(payload, path)
        if value is _MISSING:
            return False
        options = wanted if isinstance(wanted, list) else [wanted]
        if not any(_same(value, option) for option in options):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    return (type(a) is type(b) and a == b) or (
        type(a) in (int, float) and type(b) in (int, float) and a == b
    )


def run_args(rule: OnRule, payload: Any) -> bytes:
    """The args JSON a delivery gives its run: the payload (an object as is, any other
    value as ``{"payload": value}``, nothing for null), or the rule's selection."""
    if rule.args is None:
        if payload is None:
            return b""
        args = payload if isinstance(payload, dict) else {"payload": payload}
    else:
        args = {}
        for name, path in rule.args.items():
            value = field_at(payload, path)
            if value is not _MISSING:
                args[name] = value
    raw = msgspec.json.encode(args)
    if len(raw) > ARGS_MAX_BYTES:  # the payload's bound is lower; a selection's is not
        raise ValidationError(f"the run's args are {len(raw)} bytes, more than {ARGS_MAX_BYTES}")
    return raw


def rules_for(rules: list[OnRule], event: str) -> list[OnRule]:
    return [rule for rule in rules if rule.event == event]
