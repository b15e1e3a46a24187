"""Every match of a cron expression inside a spring-forward gap fires, in order, as the
documented rule says, checked against a slow obvious model (issue 48, repros 1 and 3).

The model shares nothing with the engine (no croniter, no classify): it walks every
minute of the zone's wall clock, matches the five fields by a parser of its own (numbers,
ranges, steps, lists, ``*``), and applies the README's rule literally: a wall time that
does not exist fires, for a fixed hour, shifted forward by the size of the gap (at the
instant the offset before the gap gives it), and not at all for a wildcard hour; a wall
time that happens twice fires at its first occurrence for a fixed hour, at both for a
wildcard hour. The engine was restarting its search at the previous fire's wall time, so
the second and later matches of one gap were lost (``0,30 2 * * *`` in New York, 02:30 of
the skipped hour), and it assumed instants grow with wall time (Lord Howe's 30-minute
gap: 02:20 shifted to 02:50 fired, 02:40 was lost).
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest

from shardsched.core.instants import from_ms, to_ms
from shardsched.core.schedule import cron_next_ms

RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _values(field: str, lo: int, hi: int) -> set[int]:
    out: set[int] = set()
    for part in field.split(","):
        body, _, step = part.partition("/")
        if body == "*":
            a, b = lo, hi
        elif "-" in body:
            a, b = (int(x) for x in body.split("-"))
        else:
            a = b = int(body)
            if step:
                b = hi
        out |= set(range(a, b + 1, int(step) if step else 1))
    return out


def model(expression: str, zone_name: str, start: datetime, end: datetime) -> list[datetime]:
    """The instants in (start, end] the documented rule fires at, minute by minute."""
    fields = expression.split()
    sets = [_values(f, lo, hi) for f, (lo, hi) in zip(fields, RANGES, strict=True)]
    wildcard = fields[1].startswith("*")
    zone = zoneinfo.ZoneInfo(zone_name)
    out = []
    wall = (start - timedelta(hours=30)).astimezone(zone).replace(tzinfo=None, second=0)
    wall = wall.replace(microsecond=0)
    last = (end + timedelta(hours=30)).astimezone(zone).replace(tzinfo=None)
    while wall <= last:
        dow = (wall.weekday() + 1) % 7
        if (wall.minute in sets[0] and wall.hour in sets[1] and wall.day in sets[2]
                and wall.month in sets[3] and dow in sets[4]):  # fmt: skip
            # every instant whose local wall time is this one (0, 1 or 2 of them)
            guesses = {
                (wall - o).replace(tzinfo=UTC)
                for o in {zone.utcoffset(wall + timedelta(hours=h)) for h in range(-26, 27)}
            }
            real = sorted(g for g in guesses if g.astimezone(zone).replace(tzinfo=None) == wall)
            if not real:  # in a gap: shifted by its size (the offset before it), or skipped
                if not wildcard:
                    before = zone.utcoffset(wall - timedelta(hours=26))
                    for h in range(26, 0, -1):  # the offset just before the gap
                        probe = (wall - timedelta(hours=h)).replace(tzinfo=zone)
                        if probe.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == (
                            wall - timedelta(hours=h)
                        ):
                            before = probe.utcoffset()
                    out.append((wall - before).replace(tzinfo=UTC))
            else:
                out += real if wildcard else real[:1]
        wall += timedelta(minutes=1)
    return sorted({t for t in out if start < t <= end})  # one tick an instant


def engine(expression: str, zone_name: str, start: datetime, end: datetime) -> list[datetime]:
    out, t = [], to_ms(start)
    while True:
        t = cron_next_ms(expression, zone_name, t)
        if from_ms(t) > end:
            return out
        out.append(from_ms(t))


CASES = [
    ("0,30 2 * * *", "America/New_York", datetime(2026, 3, 8, 0, tzinfo=UTC)),
    ("*/15 1 * * *", "Europe/London", datetime(2026, 3, 28, 12, tzinfo=UTC)),
    ("*/15 1 * * *", "Europe/Dublin", datetime(2026, 3, 28, 12, tzinfo=UTC)),
    ("20,40 2 * * *", "Australia/Lord_Howe", datetime(2026, 10, 3, 0, tzinfo=UTC)),
    ("0,20,40 2 * * *", "Australia/Lord_Howe", datetime(2027, 4, 3, 0, tzinfo=UTC)),
    ("*/10 2 * * *", "Europe/Berlin", datetime(2026, 3, 28, 12, tzinfo=UTC)),
    ("*/10 2 * * *", "Europe/Berlin", datetime(2026, 10, 24, 12, tzinfo=UTC)),
    ("5,35 * * * *", "America/New_York", datetime(2026, 3, 7, 18, tzinfo=UTC)),
    ("5,35 * * * *", "America/New_York", datetime(2026, 10, 31, 18, tzinfo=UTC)),
    ("0 0,1 * * *", "America/Santiago", datetime(2026, 9, 4, 12, tzinfo=UTC)),
    ("30 0 * * *", "Asia/Beirut", datetime(2026, 3, 27, 12, tzinfo=UTC)),
    ("15,45 1 * * *", "Antarctica/Troll", datetime(2026, 3, 28, 12, tzinfo=UTC)),
]


@pytest.mark.parametrize(("expression", "zone_name", "start"), CASES)
def test_the_engine_fires_what_the_minute_by_minute_model_fires(
    expression: str, zone_name: str, start: datetime
) -> None:
    end = start + timedelta(days=3)
    want = model(expression, zone_name, start, end)
    got = engine(expression, zone_name, start, end)
    zone = zoneinfo.ZoneInfo(zone_name)

    def shown(ts: list[datetime]) -> list[str]:
        return [t.astimezone(zone).strftime("%m-%d %H:%M%z") for t in ts]

    assert shown(got) == shown(want)
