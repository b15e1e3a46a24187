"""Plans on a schedule's days and times: its next fire times, and named calendars."""

from __future__ import annotations

from datetime import datetime

from shardsched.core.calendars import Calendar, CalendarList, CalendarRule, CalendarView
from shardsched.core.models import (
    Schedule,
    SchedulePreviewRequest,
)
from shardsched.core.views import (
    SchedulePreview,
)
from shardsched.ops.schedules import calendars
from shardsched.ops.schedules.preview import preview_with_calendars
from shardsched.sdk.plans import (
    Handle,
    Plan,
)
from shardsched.store.calls import Op


def next_fire_times(
    c: Handle,
    schedule: Schedule,
    count: int = 10,
    after: datetime | None = None,
    job_id: str = "",
    spread_s: float = 0.0,
    *,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    max_fires: int | None = None,
    calendars: CalendarRule | None = None,
) -> Plan[SchedulePreview]:
    """The schedule's next fire times (UTC and its wall clock), DST moves flagged; its
    ``H`` fields and its ticks' planned times as for ``job_id`` with ``spread_s``; a
    job's window, ``max_fires`` and named calendars in effect (``stops`` says why the
    list ends short, ``suppressed`` each tick a calendar skips)."""
    request = SchedulePreviewRequest(
        schedule=schedule,
        count=count,
        after=after,
        job_id=job_id,
        spread_s=spread_s,
        starts_at=starts_at,
        ends_at=ends_at,
        max_fires=max_fires,
        calendars=calendars,
    )
    return Plan(preview_with_calendars(c.deployment, request))


def put_calendar(c: Handle, name: str, calendar: Calendar) -> Plan[CalendarView]:
    """Add or replace a named calendar (core/calendars.py): every job naming it decides
    its next tick with it."""

    def op() -> Op:
        view, _ = yield from calendars.put_calendar(c.deployment, name, calendar)
        return view

    return Plan(op())


def get_calendar(c: Handle, name: str) -> Plan[CalendarView]:
    return Plan(calendars.get_calendar(c.deployment, name))


def list_calendars(c: Handle) -> Plan[CalendarList]:
    return Plan(calendars.list_calendars(c.deployment))


def delete_calendar(c: Handle, name: str) -> Plan[None]:
    return Plan(calendars.delete_calendar(c.deployment, name))
