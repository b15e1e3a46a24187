"""The kinds of schedule a job or DAG has (what users send, part of :mod:`.models`): a cron
expression, an interval, one instant, a window per cron tick, several cron specs, or none
(``triggered``: only its triggers run it). When
each fires is :mod:`.schedule`'s arithmetic."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from shardsched.core.cron import CronDialect
from shardsched.core.dst_policy import DstPolicy

AwareDatetime = Annotated[datetime, msgspec.Meta(tz=True)]


class CronSchedule(msgspec.Struct, tag="cron", tag_field="type", forbid_unknown_fields=True):
    """A 5-field cron expression evaluated on the wall clock of ``timezone``; ``dst`` says
    what it does when that clock jumps (:class:`DstPolicy`), ``dialect`` whose reading of
    the day fields and DST defaults it follows (``debian``: Debian cron's; left out: ours,
    docs/concepts.md)."""

    expression: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] = "UTC"
    dst: DstPolicy | msgspec.UnsetType = msgspec.UNSET  #: left out: not encoded, the default
    dialect: CronDialect | msgspec.UnsetType = msgspec.UNSET  #: left out: not encoded, ours


class IntervalSchedule(
    msgspec.Struct, tag="interval", tag_field="type", forbid_unknown_fields=True
):
    """Every ``every_s`` seconds (at least 0.1), counted from the job's creation (or
    ``start_at``)."""

    every_s: Annotated[float, msgspec.Meta(ge=0.1, le=366 * 86400)]
    start_at: AwareDatetime | None = None


class OnceSchedule(msgspec.Struct, tag="once", tag_field="type", forbid_unknown_fields=True):
    """A single firing at ``at`` (RFC 3339 with an offset); a past ``at`` fires at once."""

    at: AwareDatetime


class WindowSchedule(msgspec.Struct, tag="window", tag_field="type", forbid_unknown_fields=True):
    """Run once per window: a window opens at each tick of ``cron`` (on the wall clock of
    ``timezone``) and lasts ``duration_s``. Its one run starts as early as a worker is
    free; a tick found late (every node down a while) still fires while its window is
    open; a run not started when its window closes is skipped (``start_deadline``), and a
    window that closed before its tick was even seen is skipped ``window_closed``."""

    cron: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    duration_s: Annotated[float, msgspec.Meta(ge=1, le=366 * 86400)]
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] = "UTC"


class MultiSchedule(msgspec.Struct, tag="multi", tag_field="type", forbid_unknown_fields=True):
    """Several cron specs as one schedule: it fires at every tick of any of them (one
    tick where two match the same instant), e.g. 09:00 on weekdays and 11:00 at
    weekends. Each has its own zone and DST policy; the first's zone is the schedule's
    (its calendar days, its local times)."""

    schedules: Annotated[list[CronSchedule], msgspec.Meta(min_length=1, max_length=20)]


class TriggeredSchedule(
    msgspec.Struct, tag="triggered", tag_field="type", forbid_unknown_fields=True
):
    """No clock at all: the job runs only when something triggers it (an event it listens
    to, a hook, another job's outcome, or by hand: its ``on`` rules, core/events.py). A
    job given ``on`` and no schedule has this one."""


Schedule = (
    CronSchedule
    | IntervalSchedule
    | OnceSchedule
    | WindowSchedule
    | MultiSchedule
    | TriggeredSchedule
)


def schedule_zone(schedule: Schedule) -> str:
    """The zone of a schedule's wall clock (its days, its local times): UTC for an
    interval or a one-off, the first spec's for several."""
    if isinstance(schedule, MultiSchedule):
        return schedule.schedules[0].timezone
    return schedule.timezone if isinstance(schedule, CronSchedule | WindowSchedule) else "UTC"


def cron_specs(schedule: Schedule) -> list[CronSchedule]:
    """The cron specs a schedule fires by, whose DST decisions it has (a window's cron is
    one, under the default rule; none for an interval or a one-off)."""
    if isinstance(schedule, MultiSchedule):
        return schedule.schedules
    if isinstance(schedule, WindowSchedule):
        return [CronSchedule(expression=schedule.cron, timezone=schedule.timezone)]
    return [schedule] if isinstance(schedule, CronSchedule) else []
