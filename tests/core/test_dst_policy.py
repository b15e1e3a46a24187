"""Explicit DST policy, table-driven: both changes of 2026 in four zones with different
shifts (Europe/Berlin and America/New_York: one hour; Australia/Lord_Howe: 30 minutes;
Antarctica/Troll: two hours), every policy. The expected instants are worked out by hand
from each zone's offsets (written beside each row), not by the code under test."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from shardsched.core.dst import suppressed_between
from shardsched.core.dst_policy import DstGap, DstPolicy, DstRepeat
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.models import CronSchedule
from shardsched.core.schedule import first_fire_ms, next_fire_ms, parse_cron


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# zone, expression, window (UTC), the wall time's instants: (shifted, or first, second)
GAPS = [
    # 2026-03-29 02:00 CET (+1) -> 03:00 CEST (+2): 02:30 does not exist; shifted: 03:30 CEST
    ("Europe/Berlin", "30 2 * * *", "2026-03-29T00:00", "2026-03-29T23:00", "2026-03-29T01:30"),
    # 2026-03-08 02:00 EST (-5) -> 03:00 EDT (-4): shifted 02:30 is 03:30 EDT
    ("America/New_York", "30 2 * * *", "2026-03-08T05:00", "2026-03-08T20:00", "2026-03-08T07:30"),
    # 2026-10-04 02:00 LHST (+10:30) -> 02:30 LHDT (+11): 02:15 shifted is 02:45 LHDT
    ("Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00", "2026-10-04T06:00",
     "2026-10-03T15:45"),
    # 2026-03-29 01:00 +00 -> 03:00 +02: two hours gone; 01:30 shifted is 03:30 +02
    ("Antarctica/Troll", "30 1 * * *", "2026-03-28T22:00", "2026-03-29T20:00", "2026-03-29T01:30"),
]  # fmt: skip
REPEATS = [
    # 2026-10-25 03:00 CEST (+2) -> 02:00 CET (+1): 02:30 at +2, then at +1
    ("Europe/Berlin", "30 2 * * *", "2026-10-24T23:00", "2026-10-25T12:00",
     "2026-10-25T00:30", "2026-10-25T01:30"),
    # 2026-11-01 02:00 EDT (-4) -> 01:00 EST (-5): 01:30 at -4, then at -5
    ("America/New_York", "30 1 * * *", "2026-11-01T04:00", "2026-11-01T20:00",
     "2026-11-01T05:30", "2026-11-01T06:30"),
    # 2026-04-05 02:00 LHDT (+11) -> 01:30 LHST (+10:30): 01:45 at +11, then at +10:30
    ("Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00", "2026-04-05T06:00",
     "2026-04-04T14:45", "2026-04-04T15:15"),
    # 2026-10-25 03:00 +02 -> 01:00 +00: two hours repeated; 01:30 at +2, then at +0
    ("Antarctica/Troll", "30 1 * * *", "2026-10-24T20:00", "2026-10-25T20:00",
     "2026-10-24T23:30", "2026-10-25T01:30"),
]  # fmt: skip


def fires(schedule: CronSchedule, lo: str, hi: str) -> list[datetime]:
    out, t = [], first_fire_ms(schedule, to_ms(z(lo)))
    while t is not None and t <= to_ms(z(hi)):
        out.append(from_ms(t))
        t = next_fire_ms(schedule, t)
    return out


def suppressed(schedule: CronSchedule, lo: str, hi: str) -> list[tuple[datetime, str]]:
    fields = parse_cron(schedule.expression)
    found = suppressed_between(fields, schedule.timezone, schedule.dst, z(lo), z(hi))
    return [(s.instant, s.reason) for s in found]


@pytest.mark.parametrize("gap", [None, DstGap.SHIFT, DstGap.SKIP])
@pytest.mark.parametrize(("zone", "expr", "lo", "hi", "shifted"), GAPS)
def test_a_wall_time_the_clock_skips(zone, expr, lo, hi, shifted, gap) -> None:
    dst = msgspec.UNSET if gap is None else DstPolicy(gap=gap)
    schedule = CronSchedule(expression=expr, timezone=zone, dst=dst)
    if gap == DstGap.SKIP:
        assert fires(schedule, lo, hi) == []
        assert suppressed(schedule, lo, hi) == [(z(shifted), "dst_gap")]
    else:  # shift, and the default for a fixed hour (Vixie cron's)
        assert fires(schedule, lo, hi) == [z(shifted)]
        assert suppressed(schedule, lo, hi) == []


@pytest.mark.parametrize("repeat", [None, DstRepeat.FIRST, DstRepeat.SECOND, DstRepeat.BOTH])
@pytest.mark.parametrize(("zone", "expr", "lo", "hi", "first", "second"), REPEATS)
def test_a_wall_time_the_clock_shows_twice(zone, expr, lo, hi, first, second, repeat) -> None:
    dst = msgspec.UNSET if repeat is None else DstPolicy(repeat=repeat)
    schedule = CronSchedule(expression=expr, timezone=zone, dst=dst)
    expected = {
        None: ([first], [(z(second), "dst_repeat_skipped")]),  # Vixie: a fixed hour, once
        DstRepeat.FIRST: ([first], [(z(second), "dst_repeat_skipped")]),
        DstRepeat.SECOND: ([second], [(z(first), "dst_first_skipped")]),
        DstRepeat.BOTH: ([first, second], []),
    }[repeat]
    assert fires(schedule, lo, hi) == [z(t) for t in expected[0]]
    assert suppressed(schedule, lo, hi) == expected[1]


def test_the_default_for_a_wildcard_hour_is_unchanged_and_each_half_can_be_set() -> None:
    """ "0 * * * *" in Berlin: Vixie cron has no 02:00 on the spring day and two on the
    autumn one; ``gap: shift`` gives the spring day's 02:00 as 03:00 CEST, which 03:00
    itself is (one firing, not two); ``repeat: first`` fires the autumn 02:00 once."""
    hourly = CronSchedule(expression="0 * * * *", timezone="Europe/Berlin")
    spring = fires(hourly, "2026-03-29T00:30", "2026-03-29T02:30")
    assert spring == [z("2026-03-29T01:00"), z("2026-03-29T02:00")]  # 03:00 and 04:00 CEST
    assert suppressed(hourly, "2026-03-29T00:00", "2026-03-29T03:00") == [
        (z("2026-03-29T01:00"), "dst_gap")
    ]
    autumn = fires(hourly, "2026-10-24T23:30", "2026-10-25T02:30")
    assert autumn == [z(f"2026-10-25T0{h}:00") for h in (0, 1, 2)]  # 02:00 CEST, 02:00 CET, 03:00
    once = CronSchedule(
        expression="0 * * * *", timezone="Europe/Berlin", dst=DstPolicy(repeat=DstRepeat.FIRST)
    )
    assert fires(once, "2026-10-24T23:30", "2026-10-25T02:30") == [
        z("2026-10-25T00:00"),
        z("2026-10-25T02:00"),
    ]


def test_a_policy_is_stored_only_when_given() -> None:
    """A schedule without ``dst`` encodes as before the field existed (stored timings and
    specs keep their bytes); an unknown policy value is refused."""
    plain = CronSchedule(expression="0 3 * * *", timezone="Europe/Berlin")
    assert b"dst" not in msgspec.json.encode(plain)
    given = msgspec.json.encode(
        CronSchedule(expression="0 3 * * *", dst=DstPolicy(gap=DstGap.SKIP))
    )
    assert b'"dst":{"gap":"skip"}' in given
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"expression":"0 3 * * *","dst":{"gap":"later"}}', type=CronSchedule)


def test_the_ledger_shows_each_dst_decision_as_a_skipped_tick() -> None:
    """The audit's accounting (ops/history/ledger.py) of a daily 02:30 Berlin job with
    ``gap: skip, repeat: second`` over 2026: every tick fired once, and the two wall times
    its policy does not fire at are skipped ticks with their reason, not missing ones."""
    from shardsched.core.models import Timing
    from shardsched.ops.history.ledger import JobHistory, Outcome, Segment, account

    policy = DstPolicy(gap=DstGap.SKIP, repeat=DstRepeat.SECOND)
    schedule = CronSchedule(expression="30 2 * * *", timezone="Europe/Berlin", dst=policy)
    lo, hi = z("2026-03-01T00:00"), z("2026-11-01T00:00")
    ticks = [to_ms(t) for t in fires(schedule, lo.isoformat()[:16], hi.isoformat()[:16])]
    history = JobHistory(
        job_id="j",
        segments=[Segment(ticks[0], Timing(schedule=schedule), None, None)],
        timer=next_fire_ms(schedule, ticks[-1]),
        runs={t: [(f"j:{t}:1", t + 5, False)] for t in ticks},
        skips=[],
    )
    records = account(history, to_ms(hi))
    skipped = [(r.tick, r.reason) for r in records if r.outcome == Outcome.SKIPPED]
    assert skipped == [
        (z("2026-03-29T01:30"), "dst_gap"),  # 02:30 CET does not exist that day
        (z("2026-10-25T00:30"), "dst_first_skipped"),  # 02:30 CEST; it fires at 02:30 CET
    ]
    assert {r.outcome for r in records} == {Outcome.FIRED, Outcome.SKIPPED}
    assert len(records) == len(ticks) + 2
    assert z("2026-10-25T01:30") in [r.tick for r in records if r.outcome == Outcome.FIRED]
    limited = account(history, to_ms(hi), limit=30)  # a page of ticks: in order, cut
    assert [r.tick for r in limited] == [r.tick for r in records[:31]]


@pytest.mark.parametrize(("zone", "expression", "lo", "hi", "shifted"), GAPS)
def test_the_virtual_clock_meets_each_gap_as_the_table_says(zone, expression, lo, hi, shifted):
    """The same hand-worked table through shardsched.testing (the kit a user tests a
    schedule with): the default rule fires the gap's match once, shifted, and says so."""
    from shardsched.core.models import JobSpec
    from shardsched.testing import simulate

    job = JobSpec(
        name="j", schedule=CronSchedule(expression=expression, timezone=zone), command="x"
    )
    sim = simulate(job, z(lo), z(hi) - z(lo))
    assert [(t.at, t.outcome, t.dst) for t in sim] == [(z(shifted), "fired", "dst_shifted")]


@pytest.mark.parametrize(("zone", "expression", "lo", "hi", "first", "second"), REPEATS)
def test_the_virtual_clock_meets_each_repeat_as_the_table_says(
    zone, expression, lo, hi, first, second
):
    from shardsched.core.models import JobSpec
    from shardsched.testing import simulate

    job = JobSpec(
        name="j", schedule=CronSchedule(expression=expression, timezone=zone), command="x"
    )
    sim = simulate(job, z(lo), z(hi) - z(lo))
    assert [(t.at, t.outcome) for t in sim] == [(z(first), "fired"), (z(second), "skipped")]
