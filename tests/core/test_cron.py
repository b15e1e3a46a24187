"""Next-fire arithmetic, table-driven, across both DST changes (no Redis)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shardsched.core.instants import to_ms
from shardsched.core.models import CronSchedule, IntervalSchedule, OnceSchedule
from shardsched.core.schedule import (
    NextFireMemo,
    cron_next_ms,
    first_fire_ms,
    next_fire_ms,
    parse_cron,
)


def z(text: str) -> int:
    return to_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


def sequence(expr: str, tz: str, start: str, n: int) -> list[str]:
    out, t = [], z(start)
    for _ in range(n):
        t = cron_next_ms(expr, tz, t)
        out.append(datetime.fromtimestamp(t / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ"))
    return out


@pytest.mark.parametrize(
    ("expr", "tz", "start", "expected"),
    [
        # Berlin spring forward (2026-03-29 02:00 CET -> 03:00 CEST): 02:30 does not exist,
        # the fixed-hour job fires once, shifted by the gap, at 03:30 CEST (01:30Z).
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2026-03-27T12:00Z",
            ["2026-03-28T01:30Z", "2026-03-29T01:30Z", "2026-03-30T00:30Z"],
        ),
        # Berlin fall back (2026-10-25 03:00 CEST -> 02:00 CET): 02:30 happens twice,
        # the fixed-hour job fires at the first (00:30Z), not again at 01:30Z.
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-23T12:00Z",
            ["2026-10-24T00:30Z", "2026-10-25T00:30Z", "2026-10-26T01:30Z"],
        ),
        # New York spring forward (2026-03-08 02:00 EST -> 03:00 EDT): hourly has no 02:00,
        # and 01:00 EST (06:00Z) is followed one real hour later by 03:00 EDT (07:00Z).
        (
            "0 * * * *",
            "America/New_York",
            "2026-03-08T04:30Z",
            ["2026-03-08T05:00Z", "2026-03-08T06:00Z", "2026-03-08T07:00Z", "2026-03-08T08:00Z"],
        ),
        # New York fall back (2026-11-01 02:00 EDT -> 01:00 EST): hourly fires in both
        # 01:00s (05:00Z and 06:00Z): every real hour, none twice, none skipped.
        (
            "0 * * * *",
            "America/New_York",
            "2026-11-01T03:30Z",
            ["2026-11-01T04:00Z", "2026-11-01T05:00Z", "2026-11-01T06:00Z", "2026-11-01T07:00Z"],
        ),
        ("*/15 * * * *", "UTC", "2026-01-01T00:07Z", ["2026-01-01T00:15Z", "2026-01-01T00:30Z"]),
        ("0 3 * * 1", "UTC", "2026-11-29T00:00Z", ["2026-11-30T03:00Z", "2026-12-07T03:00Z"]),
        ("0 0 29 2 *", "UTC", "2026-03-01T00:00Z", ["2028-02-29T00:00Z"]),
    ],
)
def test_cron_sequences(expr: str, tz: str, start: str, expected: list[str]) -> None:
    assert sequence(expr, tz, start, len(expected)) == expected


@pytest.mark.parametrize(
    ("tz", "start"),
    [  # each about 12 hours before a change
        ("America/New_York", "2026-03-07T19:00Z"),
        ("America/New_York", "2026-10-31T18:00Z"),
        ("Europe/Berlin", "2026-03-28T13:00Z"),
        ("Europe/Berlin", "2026-10-24T13:00Z"),
        ("Australia/Lord_Howe", "2026-04-04T03:00Z"),  # a 30-minute fall back
        ("Australia/Lord_Howe", "2026-10-03T03:30Z"),
    ],
)
def test_every_minute_is_every_real_minute_across_dst(tz: str, start: str) -> None:
    """A wildcard job never skips or repeats a real minute, whatever the clock does."""
    t = z(start)
    for _ in range(24 * 60):
        nxt = cron_next_ms("* * * * *", tz, t)
        assert nxt - t == 60_000
        t = nxt


def test_hourly_over_a_year_has_one_firing_per_real_hour() -> None:
    start = z("2026-01-01T00:00Z")
    t, count = start, 0
    while t < z("2027-01-01T00:00Z"):
        t = cron_next_ms("0 * * * *", "America/New_York", t)
        count += 1
    assert count == 365 * 24


def test_daily_fixed_hour_fires_once_a_day_over_a_year() -> None:
    t, days = z("2026-01-01T00:00Z"), set()
    for _ in range(365):
        t = cron_next_ms("30 2 * * *", "Europe/Berlin", t)
        days.add(datetime.fromtimestamp(t / 1000, UTC).date())
    assert len(days) == 365


@pytest.mark.parametrize(
    "expr", ["", "* * * *", "* * * * * *", "61 * * * *", "* 25 * * *", "bad", "0 0 31 2 x"]
)
def test_invalid_expressions(expr: str) -> None:
    with pytest.raises(ValueError):
        parse_cron(expr)


def test_unsatisfiable_expression_raises() -> None:
    with pytest.raises(ValueError):
        cron_next_ms("0 0 30 2 *", "UTC", z("2026-01-01T00:00Z"))


def test_interval_and_once() -> None:
    now = z("2026-05-01T10:00Z")
    assert first_fire_ms(IntervalSchedule(every_s=3600), now) == now + 3_600_000
    assert next_fire_ms(IntervalSchedule(every_s=1.5), now) == now + 1500
    at = datetime(2026, 8, 20, 3, tzinfo=UTC)
    assert first_fire_ms(OnceSchedule(at=at), now) == to_ms(at)
    assert next_fire_ms(OnceSchedule(at=at), to_ms(at)) is None
    start = datetime(2026, 5, 1, 12, tzinfo=UTC)
    assert first_fire_ms(IntervalSchedule(every_s=60, start_at=start), now) == to_ms(start)


def test_memo_computes_once_per_expression_and_tick() -> None:
    memo = NextFireMemo()
    raw = b'{"schedule":{"type":"cron","expression":"* * * * *","timezone":"UTC"}}'
    prev = z("2026-05-01T10:00Z")
    first = memo.next_after(raw, prev)
    assert first == prev + 60_000
    assert len(memo._next) == 1
    for _ in range(1000):
        assert memo.next_after(raw, prev) == first
    assert len(memo._next) == 1
    assert isinstance(memo.timing(raw).schedule, CronSchedule)


def test_last_day_weekday_and_nth_weekday_of_the_month() -> None:
    """``L`` (the month's last day), ``W`` (the weekday nearest a day), ``#`` (the n-th
    weekday of the month) and ``L<d>`` or ``<d>L`` (its last such weekday), as croniter
    and Quartz read them, and ``LW`` (the last weekday) which croniter did not read.
    Expected dates worked out from the 2026 calendar."""
    from datetime import UTC, datetime

    from shardsched.core.instants import from_ms, to_ms
    from shardsched.core.schedule import cron_next_ms, parse_cron

    def three(expression: str) -> list[str]:
        out, t = [], to_ms(datetime(2026, 1, 1, tzinfo=UTC))
        for _ in range(3):
            t = cron_next_ms(expression, "UTC", t)
            out.append(from_ms(t).date().isoformat())
        return out

    assert three("0 0 L * *") == ["2026-01-31", "2026-02-28", "2026-03-31"]
    assert three("0 0 * * 5#3") == ["2026-01-16", "2026-02-20", "2026-03-20"]  # 3rd Friday
    assert three("0 0 * * L5") == ["2026-01-30", "2026-02-27", "2026-03-27"]  # last Friday
    # the 15th, or the weekday nearest it: Feb 15 and Mar 15 2026 are Sundays
    assert three("0 0 15W * *") == ["2026-01-15", "2026-02-16", "2026-03-16"]
    assert three("0 0 * * 5L") == three("0 0 * * L5")
    # Jan 31 2026 is a Saturday, May 31 a Sunday
    assert three("0 0 LW 1,3,5 *") == ["2026-01-30", "2026-03-31", "2026-05-29"]
    with pytest.raises(ValueError, match="day-of-week field"):
        parse_cron("0 0 * * L")
