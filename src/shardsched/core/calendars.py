"""Named calendars: sets of days a schedule includes or excludes (business days, holidays,
a freeze), kept once per deployment and shared by every job that names them.

A calendar is dates, inclusive date ranges and weekdays. A job's :class:`CalendarRule`
names the calendars its ticks must fall in (``include``: any one of them; none named,
every day) and those they must not (``exclude``: none of them). The day of a tick is its
date on the wall clock of the schedule's time zone (UTC for an interval or a one-off).

A calendar is a decision at each tick, never a change to the schedule's arithmetic: the
timer still holds every nominal tick, and the owner decides, with the calendars it holds
at that instant, to fire the tick or to skip it as a recorded ``calendar`` decision
(core/catchup.py ``on_calendar``). So the ledger and the audit show each excluded tick
as skipped with a reason, and a calendar changed through the API applies from the next
tick of every job, with nothing re-planned. A calendar that does not exist (deleted) has no day:
a job that includes only it skips every tick until it is put back.
"""

from __future__ import annotations

import enum
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Annotated

import msgspec

from shardsched.core.errors import ValidationError
from shardsched.core.instants import from_ms

#: What a calendar's name may be (it is a path segment and a hash field).
CALENDAR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$(?!\n)")
#: The reason a skipped tick carries in the ledger, the audit and the metric.
CALENDAR_SKIP = "calendar"

CalendarName = Annotated[str, msgspec.Meta(pattern=CALENDAR_NAME.pattern)]


class Weekday(enum.StrEnum):
    MON = "mon"
    TUE = "tue"
    WED = "wed"
    THU = "thu"
    FRI = "fri"
    SAT = "sat"
    SUN = "sun"


_WEEKDAYS = list(Weekday)


class DateRange(msgspec.Struct, forbid_unknown_fields=True):
    """Every day from ``start`` to ``end``, both included."""

    start: date
    end: date


class Calendar(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A named set of days (``PUT /api/v1/calendars/{name}``)."""

    dates: Annotated[list[date], msgspec.Meta(max_length=10_000)] = []
    ranges: Annotated[list[DateRange], msgspec.Meta(max_length=1_000)] = []
    weekdays: Annotated[list[Weekday], msgspec.Meta(max_length=7)] = []
    description: Annotated[str, msgspec.Meta(max_length=500)] = ""

    def check(self, name: str) -> None:
        """ValidationError unless the name is a calendar's and every range runs forward."""
        if not CALENDAR_NAME.match(name):
            raise ValidationError(
                "a calendar's name is 1-64 of A-Z a-z 0-9 _ . - (not starting with _ . -)",
                "$.name",
            )
        for i, r in enumerate(self.ranges):
            if r.end < r.start:
                raise ValidationError("a range ends before it starts", f"$.ranges[{i}]")

    def contains(self, day: date) -> bool:
        return _compiled(self).contains(day)


@dataclass(frozen=True, slots=True)
class _Days:
    """A calendar as sets, for a test per tick in O(ranges)."""

    dates: frozenset[date]
    ranges: tuple[tuple[date, date], ...]
    weekdays: frozenset[int]

    def contains(self, day: date) -> bool:
        if day in self.dates or day.weekday() in self.weekdays:
            return True
        return any(start <= day <= end for start, end in self.ranges)


_cache: dict[int, tuple[Calendar, _Days]] = {}


def _compiled(calendar: Calendar) -> _Days:
    hit = _cache.get(id(calendar))
    if hit is not None and hit[0] is calendar:
        return hit[1]
    days = _Days(
        frozenset(calendar.dates),
        tuple((r.start, r.end) for r in calendar.ranges),
        frozenset(_WEEKDAYS.index(w) for w in calendar.weekdays),
    )
    if len(_cache) > 4096:
        _cache.clear()
    _cache[id(calendar)] = (calendar, days)
    return days


class CalendarRule(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Which calendars a job's ticks must fall in (``include``: any; none named, every
    day) and must not (``exclude``: none of them)."""

    include: Annotated[list[CalendarName], msgspec.Meta(max_length=20)] = []
    exclude: Annotated[list[CalendarName], msgspec.Meta(max_length=20)] = []

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self.include, *self.exclude]))


def day_allowed(rule: CalendarRule, book: Mapping[str, Calendar], day: date) -> bool:
    """Whether the rule lets a tick on ``day`` fire, with the calendars of ``book``."""
    if rule.include and not any(
        (cal := book.get(name)) is not None and cal.contains(day) for name in rule.include
    ):
        return False
    return not any(
        (cal := book.get(name)) is not None and cal.contains(day) for name in rule.exclude
    )


def tick_allowed(
    rule: CalendarRule, book: Mapping[str, Calendar], tick_ms: int, timezone: str
) -> bool:
    """Whether a tick (ms) fires: its date on the wall clock of ``timezone``."""
    return day_allowed(rule, book, from_ms(tick_ms).astimezone(_zone(timezone)).date())


@lru_cache(maxsize=512)
def _zone(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


class CalendarView(msgspec.Struct, kw_only=True):
    """A calendar as the API answers it."""

    name: str
    dates: list[date]
    ranges: list[DateRange]
    weekdays: list[Weekday]
    description: str

    @classmethod
    def of(cls, name: str, c: Calendar) -> CalendarView:
        return cls(
            name=name,
            dates=sorted(c.dates),
            ranges=c.ranges,
            weekdays=c.weekdays,
            description=c.description,
        )


class CalendarList(msgspec.Struct, kw_only=True):
    calendars: list[CalendarView]
