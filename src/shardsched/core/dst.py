"""What a cron schedule does when its zone's clock jumps: pure, no I/O.

A wall time a cron expression matches maps to zero, one or two instants: none or one in a
spring-forward gap, two in a fall-back's repeated stretch. The schedule's
:class:`~shardsched.core.models.DstPolicy` (``gap: shift | skip``, ``repeat: first | second
| both``) picks which fire; a half it leaves out keeps Vixie cron's rule (the module doc of
:mod:`shardsched.core.schedule`). Every wall time that does not fire is a decision with a
name, never a silence: the preview lists it, and the ledger shows it as a skipped tick
(:func:`dst_decisions` over the zone's offset changes only, so an audit of a year of a
minutely job does not walk half a million minutes to find four DST hours).
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import NamedTuple

import msgspec
from croniter import croniter

from shardsched.core.dst_policy import DstGap, DstPolicy, DstRepeat

#: Longer than any DST shift: how far either side of an offset change a wall time can be
#: moved or repeated by it.
AROUND = timedelta(hours=3)


@lru_cache(maxsize=256)
def zone_info(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


def dst_rule(
    fields: tuple[str, ...], dst: DstPolicy | msgspec.UnsetType = msgspec.UNSET
) -> tuple[DstGap, DstRepeat]:
    """The (gap, repeat) rule a schedule follows: its ``dst`` policy's, and for a half the
    policy leaves out, Vixie cron's (by whether the hour field is a wildcard)."""
    wildcard = fields[1].startswith("*")
    gap = dst.gap if isinstance(dst, DstPolicy) else None
    repeat = dst.repeat if isinstance(dst, DstPolicy) else None
    return (
        gap or (DstGap.SKIP if wildcard else DstGap.SHIFT),
        repeat or (DstRepeat.BOTH if wildcard else DstRepeat.FIRST),
    )


def classify(
    wall: datetime, zone: zoneinfo.ZoneInfo, gap: DstGap, repeat: DstRepeat
) -> tuple[list[tuple[datetime, str | None]], str | None]:
    """What the rule makes of a matching wall-clock time: the UTC instants it fires at,
    each with a note ("dst_shifted": moved past a spring-forward gap; "dst_repeated": the
    second occurrence of a repeated hour), and why an occurrence does not fire, if one
    does not ("dst_gap": the wall time does not exist; "dst_repeat_skipped": its second
    occurrence; "dst_first_skipped": its first)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first == second:
        return [(first, None)], None
    exists = first.astimezone(zone).replace(tzinfo=None) == wall
    if not exists:  # in a spring-forward gap; fold=0 maps it past the gap
        return ([], "dst_gap") if gap == DstGap.SKIP else ([(first, "dst_shifted")], None)
    if repeat == DstRepeat.BOTH:
        return [(first, None), (second, "dst_repeated")], None
    if repeat == DstRepeat.SECOND:
        return [(second, "dst_repeated")], "dst_first_skipped"
    return [(first, None)], "dst_repeat_skipped"


def instants(
    wall: datetime, zone: zoneinfo.ZoneInfo, gap: DstGap, repeat: DstRepeat
) -> list[datetime]:
    """The UTC instants at which a matching wall-clock time fires (0, 1 or 2 of them)."""
    return [instant for instant, _ in classify(wall, zone, gap, repeat)[0]]


class Suppressed(NamedTuple):
    """A matching wall time that does not fire: where it stands on the real clock (the
    occurrence not fired; for a gap, the instant a shift would have given), its wall time
    and why."""

    instant: datetime
    wall: datetime
    reason: str


def _suppressed_instant(wall: datetime, zone: zoneinfo.ZoneInfo, reason: str) -> datetime:
    fold = 1 if reason == "dst_repeat_skipped" else 0
    return wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)


def dst_decisions(
    fields: tuple[str, ...],
    timezone: str,
    dst: DstPolicy | msgspec.UnsetType,
    after: datetime,
    until: datetime,
) -> tuple[dict[datetime, str], list[Suppressed]]:
    """Every DST decision of a cron schedule in (after, until] by walking its matches:
    the notes of the instants it fires at, and the wall times it does not fire at."""
    tz = zone_info(timezone)
    gap, repeat = dst_rule(fields, dst)
    notes: dict[datetime, str] = {}
    suppressed: list[Suppressed] = []
    start = after.astimezone(tz).replace(tzinfo=None) - AROUND
    try:
        end = until.astimezone(tz).replace(tzinfo=None) + AROUND
    except OverflowError:
        end = datetime.max
    it = croniter(" ".join(fields), start)
    while True:
        try:
            wall = it.get_next(datetime)
        except (ValueError, OverflowError):  # past year 9999
            break
        if wall > end:
            break
        fires, reason = classify(wall, tz, gap, repeat)
        for instant, note in fires:
            if note and after < instant <= until:
                notes[instant] = note
        if reason:
            instant = _suppressed_instant(wall, tz, reason)
            if after < instant <= until:
                suppressed.append(Suppressed(instant, wall, reason))
    return notes, suppressed


@lru_cache(maxsize=1024)
def _year_changes(timezone: str, year: int) -> tuple[datetime, ...]:
    """The instants (to the minute) at which the zone's UTC offset changes in ``year``."""
    zone = zone_info(timezone)
    out = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC) if year < 9999 else datetime.max.replace(tzinfo=UTC)
    offset = t.astimezone(zone).utcoffset()
    while t < end:
        nxt = min(t + timedelta(days=1), end)
        o = nxt.astimezone(zone).utcoffset()
        if o != offset:
            lo, hi = t, nxt
            while hi - lo > timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                if mid.astimezone(zone).utcoffset() == offset:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
            offset = o
        t = nxt
    return tuple(out)


def offset_changes(timezone: str, lo: datetime, hi: datetime) -> list[datetime]:
    """The zone's offset changes in [lo, hi] (a fixed-offset zone: none)."""
    return [
        t
        for year in range(lo.year, hi.year + 1)
        for t in _year_changes(timezone, year)
        if lo <= t <= hi
    ]


def suppressed_between(
    fields: tuple[str, ...],
    timezone: str,
    dst: DstPolicy | msgspec.UnsetType,
    lo: datetime,
    hi: datetime,
) -> list[Suppressed]:
    """The wall times a cron schedule does not fire at in (lo, hi], in order, found by
    looking only around the zone's offset changes."""
    out: list[Suppressed] = []
    for change in offset_changes(timezone, lo - AROUND, hi + AROUND):
        after, until = max(lo, change - AROUND), min(hi, change + AROUND)
        if after < until:
            out += dst_decisions(fields, timezone, dst, after, until)[1]
    return sorted(set(out))
