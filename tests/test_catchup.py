"""Catch-up decisions for late ticks, table-driven (pure, no Redis)."""

from __future__ import annotations

from shardsched.models import Catchup, IntervalSchedule, OnceSchedule, Timing
from shardsched.shard.catchup import Decision, Skip, decide
from shardsched.shard.cron import next_fire_ms


def run(policy: Catchup, old: int, now: int, every: float = 1.0, grace: float = 2.0) -> Decision:
    timing = Timing(IntervalSchedule(every_s=every), policy, grace)
    return decide(timing, old, now, lambda t: next_fire_ms(timing.schedule, t))


def test_all_fires_every_tick_one_at_a_time() -> None:
    assert run(Catchup.ALL, 0, 10_500) == Decision(0, 1000)


def test_latest_fires_the_last_due_tick_and_records_the_rest() -> None:
    # ticks 0..10000 are due at 10_500: fire 10000, skip 0..9000 (10 ticks)
    assert run(Catchup.LATEST, 0, 10_500) == Decision(
        10_000, 11_000, Skip(0, 9_000, 10, "catchup_latest")
    )
    assert run(Catchup.LATEST, 10_000, 10_500) == Decision(10_000, 11_000)  # only one due


def test_none_skips_ticks_past_the_grace_and_keeps_the_rest() -> None:
    # grace 2 s at now=10_500: ticks 0..8000 are later than the grace (9 ticks); 9000 is not
    assert run(Catchup.NONE, 0, 10_500) == Decision(None, 9_000, Skip(0, 8_000, 9, "misfire"))
    assert run(Catchup.NONE, 9_000, 10_500) == Decision(9_000, 10_000)


def test_skip_record_round_trips() -> None:
    skip = Skip(1, 2, 3, "catchup_latest")
    assert Skip.decode(skip.encode()) == skip


def test_once_job_late_under_none_is_skipped_and_exhausted() -> None:
    from datetime import UTC, datetime

    timing = Timing(OnceSchedule(at=datetime(2026, 1, 1, tzinfo=UTC)), Catchup.NONE, 1.0)
    old = 1_767_225_600_000
    decision = decide(timing, old, old + 5_000, lambda t: next_fire_ms(timing.schedule, t))
    assert decision == Decision(None, None, Skip(old, old, 1, "misfire"))
