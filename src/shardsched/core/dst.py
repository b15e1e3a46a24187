"""What a cron schedule does when its zone's clock jumps: pure, no I/O.

A wall time a cron expression matches maps to zero, one or two instants: none or one in a
spring-forward gap, two in a fall-back's repeated stretch. The schedule's
:class:`~shardsched.core.models.DstPolicy` (``gap: shift | end | skip``, ``repeat: first |
second | both``) picks which fire; a half it leaves out keeps the dialect's default rule
(the module doc of :mod:`shardsched.core.schedule`). Every wall time that does not fire is
a decision with a name, never a silence: the preview lists it, and the ledger shows it as
a skipped tick (:func:`dst_decisions` looks only at the wall times an offset change moves,
so an audit of a year of a minutely job does not walk half a million minutes to find four
DST hours, and Apia's 24-hour jump of 2011 is looked at whole).
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import NamedTuple

import msgspec

from shardsched.core.cron import LAST_YEAR, CronDialect, CronFields, next_match
from shardsched.core.dst_policy import DstGap, DstPolicy, DstRepeat

#: Wider than any two UTC offsets differ (-12:00 to +14:00): offsets that far either side
#: of an instant are all that can map a wall time to it.
REACH = timedelta(hours=27)
_MINUTE = timedelta(minutes=1)


@lru_cache(maxsize=256)
def zone_info(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


def dst_rule(
    fields: CronFields, dst: DstPolicy | msgspec.UnsetType = msgspec.UNSET
) -> tuple[DstGap, DstRepeat]:
    """The (gap, repeat) rule a schedule follows: its ``dst`` policy's, and for a half the
    policy leaves out, its dialect's: a *wildcard* job (hour field starting with ``*``;
    in the debian dialect, minute or hour field) skips a gap and fires at both
    occurrences of a repeated time; a fixed one fires at the first occurrence, and past
    a gap shifted by its size (debian: at the gap's end)."""
    debian = fields.dialect == CronDialect.DEBIAN
    wildcard = fields.hour_star or (debian and fields.minute_star)
    gap = dst.gap if isinstance(dst, DstPolicy) else None
    repeat = dst.repeat if isinstance(dst, DstPolicy) else None
    fixed_gap = DstGap.END if debian else DstGap.SHIFT
    return (
        gap or (DstGap.SKIP if wildcard else fixed_gap),
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
    if not exists:  # in a spring-forward gap; fold=0 maps it past the gap, by its size
        if gap == DstGap.SKIP:
            return [], "dst_gap"
        if gap == DstGap.END:  # the instant the clock jumped: the gap's end
            return [(_change_in(zone, second, first), "dst_shifted")], None
        return [(first, "dst_shifted")], None
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
    fields: CronFields,
    timezone: str,
    dst: DstPolicy | msgspec.UnsetType,
    after: datetime,
    until: datetime,
) -> tuple[dict[datetime, str], list[Suppressed]]:
    """Every DST decision of a cron schedule in (after, until]: the notes of the instants
    it fires at, and the wall times it does not fire at, in order. Only the wall times an
    offset change moves or repeats are looked at (those between the wall clock's reading
    just before it and just after it)."""
    tz = zone_info(timezone)
    gap, repeat = dst_rule(fields, dst)
    notes: dict[datetime, str] = {}
    suppressed: list[Suppressed] = []
    for change in offset_changes(timezone, after - REACH, until + REACH):
        before = (change - _MINUTE).astimezone(tz).utcoffset()
        later = change.astimezone(tz).utcoffset()
        if before is None or later is None:
            continue
        naive = change.replace(tzinfo=None)
        wall = naive + min(before, later) - _MINUTE
        last = naive + max(before, later)
        while True:
            try:
                wall = next_match(fields, wall)
            except OverflowError:
                break
            if wall >= last:
                break
            fires, reason = classify(wall, tz, gap, repeat)
            for instant, note in fires:
                if note and after < instant <= until:
                    notes[instant] = note
            if reason:
                instant = _suppressed_instant(wall, tz, reason)
                if after < instant <= until:
                    suppressed.append(Suppressed(instant, wall, reason))
    return notes, sorted(set(suppressed))


def _change_in(zone: zoneinfo.ZoneInfo, lo: datetime, hi: datetime) -> datetime:
    """The instant in (lo, hi] at which the zone's offset changes (a gap's end)."""
    changes = offset_changes(str(zone.key), lo, hi)
    return changes[0] if changes else hi


def offset_range(timezone: str, lo: datetime, hi: datetime) -> tuple[timedelta, timedelta]:
    """The least and greatest UTC offset the zone has at any instant of [lo, hi]."""
    zone = zone_info(timezone)
    offsets = [lo.astimezone(zone).utcoffset() or timedelta(0)]
    offsets += [
        c.astimezone(zone).utcoffset() or timedelta(0) for c in offset_changes(timezone, lo, hi)
    ]
    return min(offsets), max(offsets)


@lru_cache(maxsize=16384)
def _year_changes(timezone: str, year: int) -> tuple[datetime, ...]:
    """The instants (to the second) at which the zone's UTC offset changes in ``year``.
    It samples every third day and bisects a span that changed: no zone has changed its
    offset twice within three days since 1970 (the closest: Brazil's 2000, seven days)."""
    zone = zone_info(timezone)
    if year > LAST_YEAR:
        return ()
    out = []
    step = 3 * 86_400
    t = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())

    def offset(s: int) -> timedelta | None:
        return datetime.fromtimestamp(s, UTC).astimezone(zone).utcoffset()

    current = offset(t)
    while t < end:
        nxt = min(t + step, end)
        o = offset(nxt)
        if o != current:
            lo, hi = t, nxt
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if offset(mid) == current else (lo, mid)
            out.append(datetime.fromtimestamp(hi, UTC))
            current = o
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
    fields: CronFields,
    timezone: str,
    dst: DstPolicy | msgspec.UnsetType,
    lo: datetime,
    hi: datetime,
) -> list[Suppressed]:
    """The wall times a cron schedule does not fire at in (lo, hi], in order."""
    return dst_decisions(fields, timezone, dst, lo, hi)[1]
