"""Schedule preview, pure: the next fire times of a schedule, in UTC and on its own wall
clock, with every firing a DST change moves or suppresses called out (the rule of
:mod:`shardsched.core.schedule`, applied by the same code that schedules)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import islice

from shardsched.core.calendars import CALENDAR_SKIP, Calendar, tick_allowed
from shardsched.core.dst import dst_decisions, zone_info
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import (
    IntervalSchedule,
    Schedule,
    SchedulePreviewRequest,
    WindowSchedule,
    cron_specs,
    schedule_zone,
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


#: Ticks looked at past the ones shown before a preview gives up on its calendars.
CALENDAR_REACH = 10_000
#: Calendar-skipped ticks listed at most (a minutely job over a holiday has 1,440).
MAX_SHOWN_SKIPS = 200


def _ticks(
    request: SchedulePreviewRequest,
    schedule: Schedule,
    after_ms: int,
    book: Mapping[str, Calendar],
    zone: str,
) -> tuple[list[int], list[int], str | None]:
    """The ticks that fire (at most ``count``), those a calendar skips on the way, and
    why the list stops short (None: it did not)."""
    starts = None if request.starts_at is None else to_ms(request.starts_at)
    ends = None if request.ends_at is None else to_ms(request.ends_at)
    if starts is not None:
        after_ms = max(after_ms, starts - 1)
    limit = request.count if request.max_fires is None else min(request.count, request.max_fires)
    fires: list[int] = []
    skipped: list[int] = []
    for tick in islice(walk(schedule, _first_after(schedule, after_ms)), CALENDAR_REACH):
        if ends is not None and tick > ends:
            return fires, skipped, "window_ended"
        if request.calendars and not tick_allowed(request.calendars, book, tick, zone):
            skipped.append(tick)
            continue
        fires.append(tick)
        if len(fires) == limit:
            stops = "max_fires" if limit == request.max_fires else None
            return fires, skipped, stops
    else:
        return (
            fires,
            skipped,
            "exhausted" if len(fires) + len(skipped) < CALENDAR_REACH else "calendar",
        )


def preview(
    request: SchedulePreviewRequest, now_ms: int, book: Mapping[str, Calendar] | None = None
) -> SchedulePreview:
    """The next ``request.count`` fire times after ``request.after`` (default: now), with
    the job's limits (a window, ``max_fires``, named calendars from ``book``) in effect."""
    validate_schedule(checked(request).schedule)
    schedule = resolved(request.schedule, request.job_id)
    off = offset_ms(request.job_id, request.spread_s)
    after_ms = now_ms if request.after is None else to_ms(request.after)
    zone = schedule_zone(schedule)
    times, by_calendar, stops = _ticks(request, schedule, after_ms, book or {}, zone)
    tz = zone_info(zone) if zone != "UTC" else UTC
    notes: dict[datetime, str] = {}
    suppressed: list[SuppressedTime] = []
    specs = cron_specs(schedule) if times else []
    fired = set(times)
    for spec in specs:
        fields = parse_cron(spec.expression, spec.dialect)
        more, skipped = dst_decisions(
            fields, spec.timezone, spec.dst, from_ms(after_ms), from_ms(times[-1])
        )
        notes.update(more)
        suppressed += [
            SuppressedTime(wall_time=w.isoformat(), reason=r)
            for instant, w, r in skipped
            # of several specs, one that fires at the instant another skips: it fired
            if len(specs) == 1 or to_ms(instant) not in fired
        ]
    if len(specs) > 1:  # the same wall time skipped by two specs is one decision
        unique = {(t.wall_time, t.reason): t for t in suppressed}
        suppressed = list(unique.values())
    suppressed += [
        SuppressedTime(
            wall_time=from_ms(t).astimezone(tz).replace(tzinfo=None).isoformat(),
            reason=CALENDAR_SKIP,
        )
        for t in by_calendar[:MAX_SHOWN_SKIPS]
    ]
    window_ms = round(schedule.duration_s * 1000) if isinstance(schedule, WindowSchedule) else None
    fire_times = [
        FireTime(
            at=from_ms(t),
            local=from_ms(t).astimezone(tz),
            dst=notes.get(from_ms(t)),
            planned=from_ms(t + off) if off else None,
            window_closes=None if window_ms is None else from_ms(t + window_ms),
        )
        for t in times
    ]
    return SchedulePreview(fire_times=fire_times, suppressed=suppressed, stops=stops)
