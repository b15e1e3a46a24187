"""The next-fire search never gives up on a real zone: every zone of the tz database, at
every UTC-offset change of 2025-2030 (where DST bites: gaps of up to two hours, as in
Antarctica/Troll, repeated hours, odd offsets), for the three shapes of schedule that
matter (every minute, every hour, a fixed wall time). Fire times are always found and
strictly increase."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest

from shardsched.core.instants import from_ms, to_ms
from shardsched.core.schedule import cron_next_ms

START, END = datetime(2025, 1, 1, tzinfo=UTC), datetime(2031, 1, 1, tzinfo=UTC)


def transitions(zone: zoneinfo.ZoneInfo) -> list[datetime]:
    """The instants (to the minute) at which the zone's UTC offset changes in [START, END)."""
    out = []
    day = timedelta(days=1)
    t = START
    offset = t.astimezone(zone).utcoffset()
    while t < END:
        nxt = t + day
        o = nxt.astimezone(zone).utcoffset()
        if o != offset:
            lo, hi = t, nxt  # offset(lo) == offset, offset(hi) != offset
            while hi - lo > timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                if mid.astimezone(zone).utcoffset() == offset:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
            offset = o
        t = nxt
    return out


ZONES = sorted(zoneinfo.available_timezones())


def test_the_troll_gap_that_stopped_a_job() -> None:
    """Antarctica/Troll jumps from +00 to +02 at 01:00Z on 2026-03-29: 120 minutes that do
    not exist. Every minute is found on both sides."""
    after = to_ms(datetime(2026, 3, 29, 0, 58, tzinfo=UTC))
    fires = []
    for _ in range(4):
        after = cron_next_ms("* * * * *", "Antarctica/Troll", after)
        fires.append(from_ms(after))
    assert fires == [datetime(2026, 3, 29, 0, 59, tzinfo=UTC)] + [
        datetime(2026, 3, 29, 1, m, tzinfo=UTC) for m in range(3)
    ]


SHAPES = (
    ("* * * * *", timedelta(minutes=20), 40),
    ("0 * * * *", timedelta(hours=4), 8),
    ("30 2 * * *", timedelta(days=2), 4),
)


def distinct_behaviours(zones: list[str]) -> list[str]:
    """One zone per distinct clock over the window: the same offset changes at the same
    instants to the same offsets (aliases such as US/Eastern and America/New_York, and
    the many zones that share a rule) make the same wall clock, so the same fire times."""
    seen: dict[tuple, str] = {}
    for name in zones:
        zone = zoneinfo.ZoneInfo(name)
        points = transitions(zone)
        key = (
            START.astimezone(zone).utcoffset(),
            tuple((p, p.astimezone(zone).utcoffset()) for p in points),
        )
        seen.setdefault(key, name)
    return sorted(seen.values())


@pytest.mark.slow  # ~10 s: every zone
def test_every_distinct_zone_clock_across_its_offset_changes() -> None:
    """The default run: one zone per distinct clock, every shape."""
    zones = distinct_behaviours(ZONES)
    assert len(zones) > 50
    walk(zones, SHAPES, minimum=10_000)


@pytest.mark.slow
@pytest.mark.parametrize("part", range(4))
def test_every_zone_name_across_its_offset_changes(part: int) -> None:
    """Every zone name, in four parts (every fourth zone) that `pytest -n 4` runs side by
    side: the four together check over 100,000 fires."""
    walk(ZONES[part::4], SHAPES, minimum=100_000 // 4)


def walk(zones: list[str], shapes: tuple, minimum: int) -> None:
    checked = 0
    for name in zones:
        zone = zoneinfo.ZoneInfo(name)
        points = transitions(zone) or [datetime(2027, 6, 1, tzinfo=UTC)]
        for when in points:
            for expression, before, steps in shapes:
                after = to_ms(when - before)
                for _ in range(steps):
                    try:
                        nxt = cron_next_ms(expression, name, after)
                    except ValueError as exc:
                        pytest.fail(f"{name} {expression!r} after {from_ms(after)}: {exc}")
                    assert nxt > after, (name, expression, from_ms(after), from_ms(nxt))
                    # never more than a day and a gap ahead for these expressions
                    assert nxt - after <= 2 * 86_400_000, (name, expression, from_ms(after))
                    after = nxt
                    checked += 1
    assert checked > minimum, checked
