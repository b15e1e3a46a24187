"""core/tick_runs (the test kit's fast tick walk) gives exactly the engine's walk
(core/ticks.walk: one next_fire_ms a tick), zone by zone, through DST changes, in both
dialects and every DST policy, for hand-picked and seeded random expressions."""

from __future__ import annotations

import random

import pytest

from shardsched.core.dst_policy import DstPolicy
from shardsched.core.models import CronSchedule, IntervalSchedule
from shardsched.core.schedule import first_fire_ms
from shardsched.core.tick_runs import ticks_from
from shardsched.core.ticks import walk

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # a 30-minute DST change
    "Pacific/Apia",  # skipped a whole day in 2011
    "America/Santiago",
    "Asia/Kolkata",
    "Africa/Casablanca",  # Ramadan: DST off and on again within a year
]
EXPRESSIONS = [
    "30 2 * * *",
    "0,30 2 * * *",
    "*/7 1-3 * * *",
    "0 * * * *",
    "15 1 * * 0",
    "0 0 L * *",
    "5 4 * * mon-fri",
    "*/20 * * * *",
    "0 0 1 1 *",
    "59 23 * * *",
    "0 12 15W * *",
    "0 9 * * 1#2",
]
DAY = 86_400_000


def same(schedule: CronSchedule, start_ms: int, days: int) -> None:
    first = first_fire_ms(schedule, start_ms)
    hi = first + days * DAY
    assert ticks_from(schedule, first, hi) == list(walk(schedule, first, hi)), schedule


def test_the_fast_walk_is_the_engines_walk_through_a_spring_and_a_fall() -> None:
    for zone in ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe"):
        for expression in ("30 2 * * *", "*/7 1-3 * * *", "0 * * * *", "0,30 2 * * *"):
            for dialect in (None, "debian"):
                kw = {} if dialect is None else {"dialect": dialect}
                schedule = CronSchedule(expression=expression, timezone=zone, **kw)
                same(schedule, 1773900000000, 240)  # mid-March 2026 into November


@pytest.mark.slow  # ~30 s: every zone, expression and dialect over two years
@pytest.mark.parametrize("zone", ZONES)
def test_the_fast_walk_is_the_engines_walk(zone: str) -> None:
    for expression in EXPRESSIONS:
        for dialect in (None, "debian"):
            kw = {} if dialect is None else {"dialect": dialect}
            for start in (1293840000000, 1774000000000):  # 2011 (Apia), 2026
                same(CronSchedule(expression=expression, timezone=zone, **kw), start, 400)


@pytest.mark.slow  # ~8 s
def test_seeded_random_expressions_and_policies_through_dst() -> None:
    rng = random.Random(51)
    for _ in range(60):
        minute = rng.choice(["*", "*/5", "0", "0,30", "45", "10-20/3"])
        hour = rng.choice(["*", "1-3", "2", "0,2,23", "*/3"])
        dom = rng.choice(["*", "1", "L", "*/2", "10-20"])
        dow = rng.choice(["*", "0", "mon-fri", "6", "1#1"])
        policy = DstPolicy(
            gap=rng.choice([None, "shift", "end", "skip"]),
            repeat=rng.choice([None, "first", "second", "both"]),
        )
        schedule = CronSchedule(
            expression=f"{minute} {hour} {dom} * {dow}",
            timezone=rng.choice(ZONES),
            dst=policy,
            **({"dialect": "debian"} if rng.random() < 0.5 else {}),
        )
        same(schedule, rng.randrange(1262304000000, 1893456000000), 200)


def test_intervals_and_the_minutely_year() -> None:
    every = IntervalSchedule(every_s=90)
    assert ticks_from(every, 0, 900_000) == list(range(0, 900_001, 90_000))
    minutely = CronSchedule(expression="* * * * *", timezone="Europe/Berlin")
    first = first_fire_ms(minutely, 1767225600000)
    year = ticks_from(minutely, first, first + 365 * DAY)
    assert len(year) == 365 * 1440 + 1  # 2026: one hour fewer, one more, the same count
    assert year == sorted(set(year))
