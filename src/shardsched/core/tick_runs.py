"""Every nominal tick of a schedule over a long span, fast: what the virtual-clock test kit
(:mod:`shardsched.testing`) walks a year of a minutely job with, in a fraction of a second.

The engine's walk (:func:`shardsched.core.ticks.walk`, one
:func:`~shardsched.core.schedule.next_fire_ms` a tick) is exact and costs ~20 µs a tick: a
year of a minutely job is ten seconds. Between two changes of its zone's UTC offset a cron
schedule's wall clock is its instants shifted by one constant, so there its ticks are the
matching wall times (the engine's own day matching, :meth:`CronFields.days_in`, crossed
with its hours and minutes) less that offset. Around each offset change, where DST rules
decide, this walks with the engine itself: the change's size and :data:`MARGIN` either
side (no DST rule moves a firing further). Intervals are
arithmetic. Any other schedule (several specs, a window) is the engine's walk.

``tests/core/test_tick_runs.py`` holds this to the engine's walk, zone by zone.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime, timedelta

from shardsched.core.cron import CronFields
from shardsched.core.dst import offset_changes, zone_info
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.models import CronSchedule, IntervalSchedule, Schedule
from shardsched.core.schedule import next_fire_ms, parse_cron
from shardsched.core.ticks import walk

#: Walked with the engine either side of an offset change, beyond the change's size (a
#: DST rule moves a match by at most that: a gap's shift, a repeat's second occurrence).
MARGIN = timedelta(minutes=5)
_EPOCH = datetime(1970, 1, 1)


def ticks_from(schedule: Schedule, first: int | None, hi: int) -> list[int]:
    """``first`` (a tick) and every tick after it up to ``hi`` inclusive, in order: what
    ``list(walk(schedule, first, hi))`` gives."""
    if first is None or first > hi:
        return []
    if isinstance(schedule, IntervalSchedule):
        every = max(round(schedule.every_s * 1000), 1)
        return list(range(first, hi + 1, every))
    if not isinstance(schedule, CronSchedule):
        return list(walk(schedule, first, hi))
    return _cron(schedule, first, hi)


def _cron(schedule: CronSchedule, first: int, hi: int) -> list[int]:
    fields = parse_cron(schedule.expression, schedule.dialect)
    zone = zone_info(schedule.timezone)
    lo_at, hi_at = from_ms(first), from_ms(hi)
    reach = timedelta(days=2)  # more than any change (Apia's 2011 jump: a day)
    guards = []
    for change in offset_changes(schedule.timezone, lo_at - reach, hi_at + reach):
        before = (change - timedelta(seconds=1)).astimezone(zone).utcoffset() or timedelta(0)
        after = change.astimezone(zone).utcoffset() or timedelta(0)
        reach_of = abs(after - before) + MARGIN
        guards.append((to_ms(change - reach_of), to_ms(change + reach_of)))
    out = [first]
    t = first  # the last tick found
    while True:
        guard = next((g for g in guards if g[1] > t), None)
        if guard is None or guard[0] > t:  # a stretch of one offset, up to the next guard
            end = hi if guard is None else min(hi, guard[0] - 1)
            offset = from_ms(t).astimezone(zone).utcoffset() or timedelta(0)
            out += _matches(fields, t, end, round(offset.total_seconds() * 1000))
            if guard is None or end >= hi:
                return out
            t = out[-1]
        # near an offset change: the engine decides, up to the guard's end
        while t < guard[1]:
            following = next_fire_ms(schedule, t)
            if following is None or following > hi:
                return out
            out.append(following)
            t = following


def _matches(fields: CronFields, after: int, until: int, offset_ms: int) -> list[int]:
    """The ticks in (after, until] of wall times matched on a clock ``offset_ms`` ahead."""
    wall_lo = from_ms(after + offset_ms).replace(tzinfo=None)
    wall_hi = from_ms(until + offset_ms).replace(tzinfo=None)
    minute_ms = [m * 60_000 for m in fields.minutes]
    day_ms = [h * 3_600_000 + m for h in fields.hours for m in minute_ms]
    out: list[int] = []
    year, month = wall_lo.year, wall_lo.month
    while (year, month) <= (wall_hi.year, wall_hi.month):
        for d in fields.days_in(year, month):
            base = round((datetime(year, month, d) - _EPOCH).total_seconds() * 1000)
            base -= offset_ms
            if base + 86_400_000 <= after or base > until:
                continue
            out += [base + x for x in day_ms]
        month += 1
        if month > 12:
            year, month = year + 1, 1
    lo_i = bisect_left(out, after + 1)
    hi_i = bisect_left(out, until + 1)
    return out[lo_i:hi_i]
