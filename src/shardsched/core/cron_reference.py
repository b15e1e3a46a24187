"""The cron rule as a slow, obvious model: the oracle the fast engine is held to, and the
ticks ``shardsched audit --reference`` expects.

A check that walks the same engine it checks is blind: an engine that loses a tick
expects nothing there, and finds nothing missing (issue 48). So this module shares
nothing with core/cron.py's walk or core/dst.py's mapping but the parse (the grammar's
:class:`~shardsched.core.cron.CronFields`). It reads the rule as docs/concepts.md states
it, literally:

* every calendar day is matched field by field (its own reading of L, W, # and the
  day rule, from the field texts);
* every matching wall time is mapped to the instants whose local time it is, by trying
  every offset the zone has around that day and keeping those that map back;
* none: the wall time is in a gap (the offset before it: the nearest earlier minute that
  exists); two: it is repeated; the policy then decides, as written.

It is slow (tens of microseconds a wall time, against the engine's one call a fire) and
meant to be: checks and audits only.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import NamedTuple

import msgspec

from shardsched.core.cron import CronDialect, CronFields, parse
from shardsched.core.dst import zone_info
from shardsched.core.dst_policy import DstGap, DstPolicy, DstRepeat
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.schedule_kinds import Schedule, cron_specs

_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)
_EARTH_WEST = timedelta(hours=12, minutes=1)  #: the farthest west offset, and a minute
_EARTH_EAST = timedelta(hours=14, minutes=1)  #: the farthest east offset, and a minute


class Fire(NamedTuple):
    instant: datetime
    note: str | None  #: "dst_shifted", "dst_repeated" or None


class Unfired(NamedTuple):
    instant: datetime  #: the occurrence not fired (a gap's: where a shift would land)
    wall: datetime
    reason: str


def _month_length(d: date) -> int:
    nxt = date(d.year + (d.month == 12), d.month % 12 + 1, 1)
    return (nxt - _DAY).day


def _cron_weekday(d: date) -> int:
    return d.isoweekday() % 7


def _nearest_weekday(d: date, target: int) -> int:
    """The Mon-Fri day of d's month closest to ``target`` (the earlier on a tie)."""
    n = _month_length(d)
    target = min(target, n)
    days = sorted(range(1, n + 1), key=lambda x: (abs(x - target), x))
    return next(x for x in days if 1 <= _cron_weekday(d.replace(day=x)) <= 5)


def _dom(f: CronFields, d: date) -> bool:
    n = _month_length(d)
    return (
        d.day in f.days
        or any(d.day == n - back for back in f.last)
        or any(d.day == _nearest_weekday(d, target) for target in f.near)
        or (f.last_weekday and d.day == _nearest_weekday(d, n))
    )


def _dow(f: CronFields, d: date) -> bool:
    wd = _cron_weekday(d)
    nth = (d.day - 1) // 7 + 1
    last = d.day + 7 > _month_length(d)
    return wd in f.weekdays or (wd, nth) in f.nth or (wd in f.last_of and last)


def day_matches(f: CronFields, d: date) -> bool:
    """Whether the day fields and month match a calendar day, by the day rule."""
    if d.month not in f.months:
        return False
    fields = f.text.split()
    free = [fields[2] in ("*", "?"), fields[4] in ("*", "?")]
    if f.dialect == CronDialect.DEBIAN:  # Vixie: a field starting with * is a star
        free = [free[0] or fields[2].startswith("*"), free[1] or fields[4].startswith("*")]
    if free[0] or free[1]:
        return _dom(f, d) and _dow(f, d)
    return _dom(f, d) or _dow(f, d)


@lru_cache(maxsize=4096)
def _offsets(zone_name: str, d: date) -> frozenset[timedelta]:
    """Every UTC offset the zone has within two days of ``d`` (sampled hourly)."""
    zone = zone_info(zone_name)
    start = datetime(d.year, d.month, d.day, tzinfo=UTC) - 2 * _DAY
    return frozenset(
        (start + timedelta(hours=h)).astimezone(zone).utcoffset() or timedelta(0)
        for h in range(24 * 5)
    )


def real_instants(zone_name: str, wall: datetime) -> list[datetime]:
    """The instants at which the zone's clock shows ``wall``: 0, 1 or 2 of them. The
    clock shows t + offset(t) at an instant t, so t = wall - o shows ``wall`` exactly when
    the zone's offset at t is o."""
    offsets = _offsets(zone_name, wall.date())
    as_utc = wall.replace(tzinfo=UTC)
    if len(offsets) == 1:  # one offset for two days around: the clock maps one to one
        (offset,) = offsets
        return [as_utc - offset]
    zone = zone_info(zone_name)
    return sorted(
        as_utc - offset
        for offset in offsets
        if (as_utc - offset).astimezone(zone).utcoffset() == offset
    )


def rule(
    f: CronFields, dst: DstPolicy | msgspec.UnsetType = msgspec.UNSET
) -> tuple[DstGap, DstRepeat]:
    """The documented rule, read again: wildcard is an hour field starting with ``*``
    (debian: minute or hour); a policy's halves override."""
    minute, hour = f.text.split()[:2]
    debian = f.dialect == CronDialect.DEBIAN
    wildcard = hour.startswith("*") or (debian and minute.startswith("*"))
    gap = dst.gap if isinstance(dst, DstPolicy) and dst.gap else None
    repeat = dst.repeat if isinstance(dst, DstPolicy) and dst.repeat else None
    if gap is None:
        gap = DstGap.SKIP if wildcard else DstGap.END if debian else DstGap.SHIFT
    if repeat is None:
        repeat = DstRepeat.BOTH if wildcard else DstRepeat.FIRST
    return gap, repeat


def _before_gap(zone_name: str, wall: datetime) -> datetime:
    """The instant of the last wall time before ``wall``'s gap that exists."""
    back = wall - _MINUTE
    while not (found := real_instants(zone_name, back)):
        back -= _MINUTE
    return found[-1]


def walls(f: CronFields, first: date, last: date) -> list[datetime]:
    """Every matching wall time of the days [first, last], in order."""
    out = []
    d = first
    while d <= last:
        if day_matches(f, d):
            out += [datetime(d.year, d.month, d.day, h, m) for h in f.hours for m in f.minutes]
        d += _DAY
    return out


def decide(
    f: CronFields,
    zone_name: str,
    dst: DstPolicy | msgspec.UnsetType,
    after: datetime,
    until: datetime,
) -> tuple[list[Fire], list[Unfired]]:
    """The fires in (after, until] (one an instant, with its note) and the wall times not
    fired whose instant is in (after, until]."""
    gap, repeat = rule(f, dst)
    notes: dict[datetime, set[str | None]] = {}
    unfired: list[Unfired] = []
    first = (after - timedelta(hours=40)).date()
    last = (until + timedelta(hours=40)).date()
    # A wall time's instants, shifted or not, are the wall time less an offset the zone
    # has (UTC-12:00 to UTC+14:00 on Earth), and a gap's end-of-gap instant lies before
    # the shifted one: a wall time later than until + 14 h or not later than after - 12 h
    # has no instant in (after, until].
    lo = (after - _EARTH_WEST).replace(tzinfo=None)
    hi = (until + _EARTH_EAST).replace(tzinfo=None)
    for wall in walls(f, first, last):
        if not lo < wall <= hi:
            continue
        fired: list[tuple[datetime, str | None]] = []
        real = real_instants(zone_name, wall)
        if not real:  # a gap: what the clock showed just before it is its offset
            just_before = _before_gap(zone_name, wall)
            shifted = (wall - _offset_at(zone_name, just_before)).replace(tzinfo=UTC)
            if gap == DstGap.SKIP:
                unfired.append(Unfired(shifted, wall, "dst_gap"))
            elif gap == DstGap.END:
                fired.append((just_before + _MINUTE, "dst_shifted"))
            else:
                fired.append((shifted, "dst_shifted"))
        elif len(real) == 1:
            fired.append((real[0], None))
        elif repeat == DstRepeat.BOTH:
            fired += [(real[0], None), (real[1], "dst_repeated")]
        elif repeat == DstRepeat.SECOND:
            fired.append((real[1], "dst_repeated"))
            unfired.append(Unfired(real[0], wall, "dst_first_skipped"))
        else:
            fired.append((real[0], None))
            unfired.append(Unfired(real[1], wall, "dst_repeat_skipped"))
        for instant, note in fired:
            notes.setdefault(instant, set()).add(note)
    fires = [Fire(t, _note(n)) for t, n in sorted(notes.items()) if after < t <= until]
    return fires, sorted(u for u in unfired if after < u.instant <= until)


def _note(notes: set[str | None]) -> str | None:
    """One instant's note when several wall times fire at it: shifted wins."""
    for note in ("dst_shifted", "dst_repeated"):
        if note in notes:
            return note
    return None


def _offset_at(zone_name: str, instant: datetime) -> timedelta:
    return instant.astimezone(zone_info(zone_name)).utcoffset() or timedelta(0)


def covers(schedule: Schedule) -> bool:
    """Whether the model has this kind of schedule (cron, window, several crons)."""
    return bool(cron_specs(schedule))


def schedule_decisions(
    schedule: Schedule, lo_ms: int, hi_ms: int
) -> tuple[list[int], list[tuple[int, str]]]:
    """A cron-like schedule's ticks in [lo_ms, hi_ms] (its specs' together, one an
    instant) and the wall times it does not fire at there (instant, reason)."""
    ticks: set[int] = set()
    unfired: list[tuple[int, str]] = []
    after, until = from_ms(lo_ms - 1), from_ms(hi_ms)
    for spec in cron_specs(schedule):
        dialect = CronDialect.SHARDSCHED if spec.dialect is msgspec.UNSET else spec.dialect
        fires, skipped = decide(
            parse(spec.expression, dialect), spec.timezone, spec.dst, after, until
        )
        ticks |= {to_ms(f.instant) for f in fires}
        unfired += [(to_ms(u.instant), u.reason) for u in skipped]
    return sorted(ticks), sorted(unfired)
