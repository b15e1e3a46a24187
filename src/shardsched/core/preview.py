"""Schedule preview, pure: the next fire times of a schedule, in UTC and on its own wall
clock, with every firing a DST change moves or suppresses called out (the rule of
:mod:`shardsched.core.schedule`, applied by the same code that schedules)."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice

from shardsched.core.dst import dst_decisions, zone_info
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import (
    CronSchedule,
    IntervalSchedule,
    Schedule,
    SchedulePreviewRequest,
    WindowSchedule,
)
from shardsched.core.schedule import first_fire_ms, parse_cron
from shardsched.core.ticks import walk
from shardsched.core.timing import resolved
from shardsched.core.validation import checked, validate_schedule
from shardsched.core.views import FireTime, SchedulePreview, SuppressedTime


def _first_after(schedule: Schedule, after_ms: int) -> int | None:
    """The schedule's first nominal tick strictly after ``after_ms`` (a past ``once`` fires
    at once, so it is its own first)."""
    if isinstance(schedule, IntervalSchedule) and schedule.start_at is not None:
        start, every = to_ms(schedule.start_at), round(schedule.every_s * 1000)
        return start if start > after_ms else start + ((after_ms - start) // every + 1) * every
    return first_fire_ms(schedule, after_ms)


def preview(request: SchedulePreviewRequest, now_ms: int) -> SchedulePreview:
    """The next ``request.count`` fire times after ``request.after`` (default: now)."""
    validate_schedule(checked(request).schedule)
    schedule = resolved(request.schedule, request.job_id)
    off = offset_ms(request.job_id, request.spread_s)
    after_ms = now_ms if request.after is None else to_ms(request.after)
    times = list(islice(walk(schedule, _first_after(schedule, after_ms)), request.count))
    tz = (
        zone_info(schedule.timezone) if isinstance(schedule, CronSchedule | WindowSchedule) else UTC
    )
    notes: dict[datetime, str] = {}
    suppressed: list[SuppressedTime] = []
    if isinstance(schedule, CronSchedule) and times:
        fields = parse_cron(schedule.expression)
        notes, skipped = dst_decisions(
            fields, schedule.timezone, schedule.dst, from_ms(after_ms), from_ms(times[-1])
        )
        suppressed = [SuppressedTime(wall_time=w.isoformat(), reason=r) for _, w, r in skipped]
    fire_times = [
        FireTime(
            at=from_ms(t),
            local=from_ms(t).astimezone(tz),
            dst=notes.get(from_ms(t)),
            planned=from_ms(t + off) if off else None,
        )
        for t in times
    ]
    return SchedulePreview(fire_times=fire_times, suppressed=suppressed)
