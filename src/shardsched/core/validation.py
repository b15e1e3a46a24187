"""Validation beyond what msgspec's declared constraints express: cron syntax, time
zones, the rules between fields. Raises :class:`msgspec.ValidationError` with the
``$.path`` of the field, as msgspec's own decoding does."""

from __future__ import annotations

import itertools
import re
import zoneinfo
from typing import TypeVar

import msgspec

from shardsched.core.concurrency import resolve_key
from shardsched.core.errors import ValidationError
from shardsched.core.events import validate_on
from shardsched.core.jitter import h_choices, has_h, resolve_h
from shardsched.core.models import (
    DAG_ID,
    JOB_ID,
    TASK_NAME,
    CronSchedule,
    JobSpec,
    MultiSchedule,
    Schedule,
    WindowSchedule,
)
from shardsched.core.params import validate_args
from shardsched.core.schedule import parse_cron

_T = TypeVar("_T")


def checked(value: _T) -> _T:
    """Check a Struct built in Python against its declared constraints (construction does
    not: only decoding does), by a JSON round trip; raises msgspec.ValidationError with the
    $.path. The SDK's input goes through the same rules as the HTTP API's."""
    msgspec.json.decode(_checker.encode(value), type=type(value))
    return value


_checker = msgspec.json.Encoder()


def validate_schedule(schedule: Schedule, path: str = "$.schedule") -> None:
    """Check what msgspec cannot: cron syntax and the time-zone name.

    Raises msgspec.ValidationError naming the field.
    """
    if isinstance(schedule, WindowSchedule):
        try:
            validate_schedule(CronSchedule(expression=schedule.cron, timezone=schedule.timezone))
        except ValidationError as exc:  # a window's expression is its `cron`
            where = f"{path}.cron" if str(exc.field).endswith(".expression") else f"{path}.timezone"
            raise ValidationError(str(exc.message), where) from None
        return
    if isinstance(schedule, MultiSchedule):
        for i, spec in enumerate(schedule.schedules):
            validate_schedule(spec, f"{path}.schedules[{i}]")
        return
    if isinstance(schedule, CronSchedule):
        try:  # an H that cannot be resolved (a range outside the field) says so here
            variants = _h_variants(schedule.expression)
        except ValueError as exc:
            raise ValidationError(str(exc), f"{path}.expression") from None
        for expression in variants:
            try:  # an H stands for one value per job: each one it can be must fire
                parse_cron(expression, schedule.dialect)
            except ValueError as exc:
                said = str(exc)
                if expression != schedule.expression:  # say what the user wrote
                    said = f"for a job whose H makes it {expression!r}: {said}"
                raise ValidationError(said, f"{path}.expression") from None
        try:
            if schedule.timezone in _HOST_ZONES:  # each host's own setting: not one clock
                raise ValueError(schedule.timezone)
            zoneinfo.ZoneInfo(schedule.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValidationError(
                f"Unknown time zone {schedule.timezone!r}", f"{path}.timezone"
            ) from None


#: Names the zone database answers that mean a host's setting or nothing, not a place.
_HOST_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def _h_variants(expression: str) -> list[str]:
    """The expressions a cron with H can stand for that can differ in whether they fire:
    one for any H but the month's, one per value of an H month (core/jitter.py)."""
    if not has_h(expression):
        return [expression]
    base = resolve_h(expression, "")
    fields = expression.split()
    if len(fields) != 5 or not has_h(fields[3]):
        return [base]
    head = base.split()[:3]
    months = itertools.product(*(h_choices(part, 3) for part in fields[3].split(",")))
    return [" ".join([*head, ",".join(m), base.split()[4]]) for m in itertools.islice(months, 256)]


def validate_spec(spec: JobSpec) -> JobSpec:
    """Validate a spec, its declared constraints and beyond; returns it for chaining."""
    checked(spec)
    if spec.depends_on:
        if spec.id is not None:
            raise ValidationError("a DAG task's id is <dag_id>.<name>, not chosen", "$.id")
        if spec.schedule is not None:
            raise ValidationError(
                "a job with depends_on runs on its DAG's ticks and takes no schedule",
                "$.schedule",
            )
        if not TASK_NAME.match(spec.name):
            raise ValidationError(
                "a DAG task's name may only hold letters, digits, '_' and '-'", "$.name"
            )
        if spec.on:
            raise ValidationError(
                "a DAG task runs when its dependencies allow: it takes no `on`", "$.on"
            )
    elif spec.schedule is None and not spec.on:
        raise ValidationError("Object missing required field `schedule`", "$.schedule")
    elif spec.schedule is None:
        pass  # only its triggers run it (ops/jobs/define gives it the `triggered` kind)
    else:
        validate_schedule(spec.schedule)
    if spec.starts_at and spec.ends_at and spec.ends_at < spec.starts_at:
        raise ValidationError("ends_at is before starts_at", "$.ends_at")
    validate_on(spec.on)
    backlog = spec.backlog
    if (
        backlog is not None
        and backlog.policy != "queue"
        and backlog.max_queued is None
        and backlog.max_age_s is None
    ):
        raise ValidationError(
            f"backlog {backlog.policy.value} needs a bound: max_queued, max_age_s or both",
            "$.backlog",
        )
    if spec.skip_late_start and spec.start_deadline_s is None:
        raise ValidationError(
            "skip_late_start skips a run not started by its start_deadline_s: set one",
            "$.skip_late_start",
        )
    rp = spec.retry_policy
    if rp.max_s < rp.base_s:
        raise ValidationError("max_s must be >= base_s", "$.retry_policy.max_s")
    validate_args(spec.args)
    if spec.concurrency_key is not None:
        resolve_key(spec.concurrency_key, spec.labels)
    elif spec.concurrency_limit is not None:
        raise ValidationError("a concurrency_limit needs a concurrency_key", "$.concurrency_limit")
    return spec


def check_job_id(job_id: str) -> None:
    """ValidationError (at ``$.id``) unless ``job_id`` is one a user may choose."""
    if not JOB_ID.match(job_id):
        raise ValidationError(
            "a job id is letters, digits, '_' and '-' (at most 100), not starting with 'dag_'",
            "$.id",
        )


def check_dag_id(dag_id: str) -> None:
    """ValidationError (at ``$.id``) unless ``dag_id`` is a DAG's, with or without dag_."""
    if not DAG_ID.match(dag_id):
        raise ValidationError(
            "a DAG id is letters, digits, '_' and '-' (at most 96; stored as dag_<id>)", "$.id"
        )


#: How deep arrays and objects may nest in a request body (a job's ``args`` included).
#: msgspec decodes nesting by recursion, and a body 50,000 deep once ended a request in a
#: RecursionError (a 500); no definition needs more than a few levels.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(rb"[\[\]{}]")


def nests_deeper(document: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``document`` opens more than ``limit`` arrays and objects
    inside each other (strings skipped: a bracket in a string is text). It does not
    validate the JSON: the decoder does that after."""
    if document.count(b"[") + document.count(b"{") <= limit:
        return False
    depth = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub(b"", document)):
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False
