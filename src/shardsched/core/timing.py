"""What the shard actor needs of a job, made from its spec: its :class:`Timing`, with the
``H`` fields of its cron resolved for it (core/jitter.py). The spec keeps the ``H``; the
stored timing holds the plain expression, so the hot path never sees one."""

from __future__ import annotations

import msgspec

from shardsched.core.instants import to_ms
from shardsched.core.jitter import has_h, resolve_h
from shardsched.core.labels import ACCOUNT_LABEL
from shardsched.core.models import (
    DEFAULT_PER_MINUTE,
    CronSchedule,
    JobSpec,
    MultiSchedule,
    Schedule,
    Timing,
    WindowSchedule,
)


def timing_of(spec: JobSpec, job_id: str) -> Timing:
    """What the shard actor needs of a job, with the ``H`` of its cron resolved for it."""
    assert spec.schedule is not None, "a job of its own has a schedule (validate_spec)"
    schedule = resolved(spec.schedule, job_id)
    start_deadline, skip_late = spec.start_deadline_s, spec.skip_late_start
    if isinstance(schedule, WindowSchedule):  # its one run starts inside its window or not
        start_deadline = min(start_deadline or schedule.duration_s, schedule.duration_s)
        skip_late = True
    return Timing(
        schedule,
        spec.catchup,
        spec.misfire_grace_s,
        spec.overlap,
        spec.max_catchup,
        spec.spread_s,
        None if spec.starts_at is None else to_ms(spec.starts_at),
        None if spec.ends_at is None else to_ms(spec.ends_at),
        spec.max_fires,
        _ms(start_deadline),
        _ms(spec.finish_deadline_s),
        skip_late,
        spec.calendars if spec.calendars and spec.calendars.names() else None,
        spec.labels.get(ACCOUNT_LABEL, ""),
        spec.catchup_per_minute or DEFAULT_PER_MINUTE,
        "" if spec.backlog is None else spec.backlog.code(),
    )


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def per_job(schedule: Schedule) -> bool:
    """Whether the schedule stands for something else per job (a cron with ``H``)."""
    if isinstance(schedule, MultiSchedule):
        return any(per_job(spec) for spec in schedule.schedules)
    return isinstance(schedule, CronSchedule) and has_h(schedule.expression)


def resolved(schedule: Schedule, member_id: str) -> Schedule:
    """The schedule with the ``H`` fields of its cron (if any) resolved for one job."""
    if isinstance(schedule, MultiSchedule) and per_job(schedule):
        specs = [resolved(spec, member_id) for spec in schedule.schedules]
        return MultiSchedule(schedules=[s for s in specs if isinstance(s, CronSchedule)])
    if isinstance(schedule, CronSchedule) and per_job(schedule):
        expression = resolve_h(schedule.expression, member_id)
        return msgspec.structs.replace(schedule, expression=expression)
    return schedule
