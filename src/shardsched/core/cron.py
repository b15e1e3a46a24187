"""Cron expressions: the grammar, parsed once, and the next wall-clock time one matches.

Ours rather than croniter's, because the rules are the product: croniter read ``1,15 * 5#3``
as third Fridays only, ignored the day of week beside ``10W`` and called ``1 * 5#3`` a
schedule that never fires (issue 48). Pure: no zone, no clock; what a wall time becomes on
the real clock is :mod:`shardsched.core.dst`'s, and the walk that turns both into a next
fire is :mod:`shardsched.core.schedule`'s. docs/concepts.md ("Cron expressions") is the
user's statement of the grammar below; ``core/cron_reference.py`` is the slow model the
tests hold this fast walk to.

Five fields, ``minute hour day-of-month month day-of-week``, each a comma list of terms:

* ``*`` (``?`` too, in the day fields), ``n``, ``a-b``, each optionally ``/step``;
  ``a/step`` is ``a-<top>/step``. A range whose start is above its end wraps round
  (``22-2`` hours: 22, 23, 0, 1, 2). Months and weekdays take names in any case
  (``JAN``, ``mon``); weekday 7 is Sunday, as 0.
* day of month: ``L`` (the last day), ``L-n`` (n days before it), ``LW`` (the last
  weekday), ``nW`` (the weekday nearest the n-th, in the same month; past the month's
  last day, its last day's), ``n-L``.
* day of week: ``d#k`` (the k-th such day of the month, k 1-5), ``dL`` or ``Ld`` (the
  last one).
* The day rule: when both day fields are restricted, a day matches either (the OR rule
  of every cron); when one is ``*`` or ``?``, only the other counts. Dialect ``debian``
  counts a field as unrestricted when it merely *starts* with ``*`` (``*/2``), as
  Vixie/Debian cron do, so ``0 0 */2 * 1`` is odd days that are Mondays there and odd
  days or Mondays here.
"""

from __future__ import annotations

import bisect
import calendar
import enum
import re
from datetime import date, datetime, timedelta
from functools import lru_cache


class CronDialect(enum.StrEnum):
    """Whose reading of the day fields and of DST a cron schedule follows."""

    SHARDSCHED = "shardsched"  #: the default (module doc; core/dst.py)
    DEBIAN = "debian"  #: Vixie/Debian cron's: what a team's crontab gave it


#: Each field's name and range (day of week: 0-7, 7 being Sunday again).
FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12),
          ("day-of-week", 0, 7))  # fmt: skip
_MONTHS = {n.upper(): i for i, n in enumerate(calendar.month_abbr) if n}
_DAYS = {n: i for i, n in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_VALUE = r"(?:[0-9]{1,2}|[A-Za-z]{3})"
_PLAIN = re.compile(rf"^(?:(\*|\?)|({_VALUE})(?:-({_VALUE}|[Ll]))?)(?:/([0-9]{{1,3}}))?$(?!\n)")
_DOM_SPECIAL = re.compile(r"^(?:L(?:-([0-9]{1,2}))?|(LW)|([0-9]{1,2})W)$(?!\n)", re.IGNORECASE)
_TEXT = re.compile(r"[ \t!-~]*")
_DOW_SPECIAL = re.compile(rf"^(?:({_VALUE})(?:#([0-9])|(L))|L({_VALUE}))$(?!\n)", re.IGNORECASE)


class CronFields:
    """A parsed expression: what each field allows, and the month-by-month days it
    matches (computed once a month and kept: a job's walk asks for the same ones)."""

    __slots__ = (
        "_by_month",
        "day_or",
        "days",
        "dialect",
        "hour_star",
        "hours",
        "last",
        "last_of",
        "last_weekday",
        "minute_star",
        "minutes",
        "months",
        "near",
        "nth",
        "text",
        "weekdays",
    )  # fmt: skip

    def __init__(self, text: str, dialect: CronDialect) -> None:
        self.text = text
        self.dialect = dialect
        self.minutes: tuple[int, ...] = ()
        self.hours: tuple[int, ...] = ()
        self.months: frozenset[int] = frozenset()
        self.days: frozenset[int] = frozenset()  #: plain days of the month
        self.last: frozenset[int] = frozenset()  #: L-n: n days before the last (L: 0)
        self.near: frozenset[int] = frozenset()  #: nW
        self.last_weekday = False  #: LW
        self.weekdays: frozenset[int] = frozenset()  #: 0-6
        self.nth: frozenset[tuple[int, int]] = frozenset()  #: d#k
        self.last_of: frozenset[int] = frozenset()  #: dL
        self.day_or = False
        self.minute_star = self.hour_star = False
        self._by_month: dict[tuple[int, int], tuple[int, ...]] = {}

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        """The days of a month the day fields match, in order ('' if the month is not one)."""
        key = (year, month)
        days = self._by_month.get(key)
        if days is None:
            if len(self._by_month) > 1024:
                self._by_month.clear()
            days = self._by_month[key] = self._compute(year, month)
        return days

    def _compute(self, year: int, month: int) -> tuple[int, ...]:
        if month not in self.months:
            return ()
        first, n = calendar.monthrange(year, month)  # Monday is 0 there
        first = (first + 1) % 7  # cron's: Sunday is 0
        dom = {d for d in self.days if d <= n} | {n - k for k in self.last if n - k >= 1}
        dom |= {_nearest_weekday(min(d, n), first, n) for d in self.near}
        if self.last_weekday:
            dom.add(_nearest_weekday(n, first, n))
        dow = {d for d in range(1, n + 1) if (first + d - 1) % 7 in self.weekdays}
        dow |= {d for wd, k in self.nth if (d := 1 + (wd - first) % 7 + 7 * (k - 1)) <= n}
        dow |= {n - (first + n - 1 - wd) % 7 for wd in self.last_of}
        return tuple(sorted(dom | dow if self.day_or else dom & dow))


def _nearest_weekday(day: int, first: int, n: int) -> int:
    """The weekday (Mon-Fri) nearest ``day`` without leaving the month (Quartz's W)."""
    wd = (first + day - 1) % 7
    if wd == 6:  # Saturday: the Friday before, or the Monday after the 1st
        return day - 1 if day > 1 else day + 2
    if wd == 0:  # Sunday: the Monday after, or the Friday before the last day
        return day + 1 if day < n else day - 2
    return day


def _number(text: str, place: int) -> int:
    name, lo, hi = FIELDS[place]
    names = _MONTHS if place == 3 else _DAYS if place == 4 else {}
    value = names.get(text.upper()) if text.isalpha() else int(text)
    if value is None or not lo <= value <= hi:
        raise ValueError(f"{name} field: {text!r} is not a value of {lo}-{hi}")
    return value


def _plain(term: str, place: int) -> tuple[set[int], bool]:
    """The values of one ordinary term, and whether it is a ``*`` (or ``?``) term."""
    name, lo, hi = FIELDS[place]
    m = _PLAIN.match(term)
    if m is None or (m.group(1) == "?" and (place not in (2, 4) or m.group(4))):
        raise ValueError(f"{name} field: {term!r} is not a term of its grammar")
    star, a_text, b_text, step_text = m.groups()
    top = 6 if place == 4 else hi
    step = int(step_text) if step_text else 1
    if step < 1:
        raise ValueError(f"{name} field: {term!r}: a step is at least 1")
    if star:
        a, b = lo, top
    else:
        a = _number(a_text, place)
        ends_last = b_text is not None and b_text.upper() == "L"
        if ends_last and place != 2:
            raise ValueError(f"{name} field: {term!r}: L ends a range of days only")
        b = hi if ends_last else _number(b_text, place) if b_text else top if step_text else a
    run = list(range(a, b + 1)) if a <= b else [*range(a, top + 1), *range(lo, b + 1)]
    return {v % 7 if place == 4 else v for v in run[::step]}, bool(star)


def _field(text: str, place: int, f: CronFields) -> tuple[set[int], bool]:
    """Parse one field into ``f`` (its special day terms) and return its plain values and
    whether it is exactly ``*`` or ``?``."""
    values: set[int] = set()
    name = FIELDS[place][0]
    for term in text.split(","):
        if place == 2 and (m := _DOM_SPECIAL.match(term)):
            back, lw, near = m.groups()
            if near is not None:
                f.near |= {_number(near, 2)}
            elif lw:
                f.last_weekday = True
            else:
                if back is not None and int(back) > 30:
                    raise ValueError(f"{name} field: {term!r}: L-n takes n of 0-30")
                f.last |= {int(back or 0)}
            continue
        if place == 4 and (m := _DOW_SPECIAL.match(term)):
            wd = _number(m.group(1) or m.group(4), 4) % 7
            if m.group(3) or m.group(4):
                f.last_of |= {wd}
            elif not 1 <= int(m.group(2)) <= 5:
                raise ValueError(f"{name} field: {term!r}: # takes 1-5 (the k-th in a month)")
            else:
                f.nth |= {(wd, int(m.group(2)))}
            continue
        more, _ = _plain(term, place)
        values |= more
    return values, text in ("*", "?")


#: Vixie cron's macros, as the five fields they stand for (@reboot has no schedule).
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@lru_cache(maxsize=4096)
def parse(expression: str, dialect: CronDialect = CronDialect.SHARDSCHED) -> CronFields:
    """Parse an expression (or a macro, ``@daily``); raises ValueError naming the field at
    fault, or saying it never fires (``0 0 30 2 *``, February 30th). Memoised: 25,000
    registrations of one expression cost one parse."""
    if not _TEXT.fullmatch(expression):  # a newline or a no-break space is no separator
        raise ValueError("a cron expression holds printable ASCII, its fields apart by spaces")
    macro = CRON_MACROS.get(expression.strip().lower())
    parts = (macro or expression).split()
    if len(parts) != 5:
        raise ValueError(
            f"Cron expression must have 5 fields (or be one of {', '.join(CRON_MACROS)}),"
            f" got {len(parts)}"
        )
    f = CronFields(" ".join(parts), CronDialect(dialect))
    minutes, _ = _field(parts[0], 0, f)
    hours, _ = _field(parts[1], 1, f)
    days, dom_any = _field(parts[2], 2, f)
    months, _ = _field(parts[3], 3, f)
    weekdays, dow_any = _field(parts[4], 4, f)
    f.minute_star, f.hour_star = parts[0].startswith("*"), parts[1].startswith("*")
    f.minutes, f.hours, f.months = tuple(sorted(minutes)), tuple(sorted(hours)), frozenset(months)
    f.days, f.weekdays = frozenset(days), frozenset(weekdays)
    if f.dialect == CronDialect.DEBIAN:  # L, W, # and ? are extensions it reads as ours
        f.day_or = not (dom_any or dow_any or parts[2][0] == "*" or parts[4][0] == "*")
    else:
        f.day_or = not (dom_any or dow_any)
    if not _fires_in_400_years(f):  # the Gregorian calendar repeats every 400 years
        raise ValueError(f"Cron expression {expression!r} never fires")
    return f


def _fires_in_400_years(f: CronFields) -> bool:
    return any(f._compute(y, m) for y in range(2000, 2400) for m in sorted(f.months))


_MINUTE = timedelta(minutes=1)
#: The last year a walk looks into (datetime's arithmetic ends at 9999).
LAST_YEAR = 9998


def next_match(f: CronFields, after: datetime) -> datetime:
    """The first wall-clock time strictly after ``after`` (naive) the fields match.
    Raises OverflowError past :data:`LAST_YEAR`."""
    t = after.replace(second=0, microsecond=0) + _MINUTE
    year, month, day, hour, minute = t.year, t.month, t.day, t.hour, t.minute
    hours, minutes = f.hours, f.minutes
    while year <= LAST_YEAR:
        for d in f.days_in(year, month):
            if d < day:
                continue
            h, m = (hour, minute) if d == day else (0, 0)
            i = bisect.bisect_left(hours, h)
            if i < len(hours) and hours[i] == h:
                j = bisect.bisect_left(minutes, m)
                if j < len(minutes):
                    return datetime(year, month, d, h, minutes[j])
                i += 1
            if i < len(hours):
                return datetime(year, month, d, hours[i], minutes[0])
        month, day, hour, minute = month + 1, 1, 0, 0
        if month > 12:
            year, month = year + 1, 1
    raise OverflowError("no match before year 9999")


def weekday(d: date) -> int:
    """Cron's day-of-week number of a date (Sunday 0)."""
    return (d.weekday() + 1) % 7
