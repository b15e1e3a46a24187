"""Catch-up decisions for late ticks, table-driven (pure, no Redis)."""

from __future__ import annotations

from shardsched.core.catchup import Decision, Skip, decide
from shardsched.core.models import Catchup, IntervalSchedule, OnceSchedule, Timing
from shardsched.core.schedule import next_fire_ms


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


def cron(policy: Catchup, expression: str = "* * * * *", max_catchup: int = 1000) -> Timing:
    from shardsched.core.models import CronSchedule

    return Timing(CronSchedule(expression=expression), policy, 60.0, max_catchup=max_catchup)


def test_all_owes_at_most_max_catchup_ticks_the_rest_recorded_skipped() -> None:
    timing = Timing(IntervalSchedule(every_s=1), Catchup.ALL, 60.0, max_catchup=5)
    step = lambda t: next_fire_ms(timing.schedule, t)  # noqa: E731
    # 11 ticks owed (0..10000): the oldest 6 skipped in one record, the newest 5 fire
    assert decide(timing, 0, 10_500, step) == Decision(
        None, 6_000, Skip(0, 5_000, 6, "catchup_limit")
    )
    assert decide(timing, 6_000, 10_500, step) == Decision(6_000, 7_000)


def test_a_backlog_of_decades_is_arithmetic_not_a_walk() -> None:
    """1970 to 2026 at one tick a second: 1.8e9 ticks owed; each policy decides at once."""
    import time

    now = 1_796_000_000_000
    started = time.perf_counter()
    for policy in Catchup:
        timing = Timing(IntervalSchedule(every_s=1), policy, 60.0)
        calls = 0

        def step(t: int, timing: Timing = timing) -> int | None:
            nonlocal calls
            calls += 1
            return next_fire_ms(timing.schedule, t)

        decision = decide(timing, 0, now, step)
        assert calls <= 2, (policy, calls)
        if policy == Catchup.ALL:
            assert decision.new == now - 999 * 1000 and decision.skip is not None
            assert decision.skip.reason == "catchup_limit"
            assert decision.skip.count == now // 1000 + 1 - 1000
        elif policy == Catchup.LATEST:
            assert decision.fire == now and decision.skip.count == now // 1000
        elif policy == Catchup.PACED:  # the newest 1,000 owed, the rest skipped; on from now
            assert decision.fire is None and decision.new == now + 1000
            assert decision.owed == (now - 999 * 1000, now)
            assert decision.skip is not None and decision.skip.count == now // 1000 + 1 - 1000
        else:
            assert decision.new == now - 60_000 and decision.skip.count == now // 1000 - 60
    assert time.perf_counter() - started < 1.0


def test_cron_catchup_after_a_year_searches_back_from_now() -> None:
    old = 1_767_225_600_000  # 2026-01-01T00:00Z
    now = old + 365 * 86_400_000 + 30_500  # a year and 30.5 s later
    calls = 0

    def step(t: int) -> int | None:
        nonlocal calls
        calls += 1
        return next_fire_ms(cron(Catchup.LATEST).schedule, t)

    latest = decide(cron(Catchup.LATEST), old, now, step)
    assert latest.fire == now - 30_500 and latest.new == now - 30_500 + 60_000
    assert latest.skip is not None and latest.skip.last == now - 30_500 - 60_000
    assert abs(latest.skip.count - 365 * 1440) <= 2  # estimated beyond the exact walk
    calls_latest, calls = calls, 0
    none = decide(cron(Catchup.NONE), old, now, step)
    assert none.fire is None and none.new == now - 30_500  # inside the 60 s grace
    calls_none, calls = calls, 0
    limited = decide(cron(Catchup.ALL, max_catchup=10), old, now, step)
    assert limited.new == now - 30_500 - 9 * 60_000
    assert limited.skip is not None and limited.skip.reason == "catchup_limit"
    assert max(calls_latest, calls_none, calls) < 2_000, (calls_latest, calls_none, calls)


def test_a_tick_planned_ahead_of_its_time_fires_as_it_is() -> None:
    """The actor plans due batches up to 300 ms before their tick: ``old`` > ``now``."""
    for policy in Catchup:
        assert run(policy, 10_000, 9_700) == Decision(10_000, 11_000), policy


def test_paced_hands_the_owed_ticks_over_and_moves_on() -> None:
    """Inside the grace a tick fires as it is; past it, the owed ticks (at most
    max_catchup) are handed over and the timer moves to the first tick after now."""
    assert run(Catchup.PACED, 9_000, 10_500) == Decision(9_000, 10_000)  # within 2 s grace
    assert run(Catchup.PACED, 0, 10_500) == Decision(None, 11_000, None, (0, 10_000))


def test_paced_with_calendars_catches_up_as_all() -> None:
    """Owed ticks of a job with calendars are decided one by one, each with them."""
    from shardsched.core.calendars import CalendarRule

    timing = Timing(
        IntervalSchedule(every_s=1), Catchup.PACED, 2.0, calendars=CalendarRule(exclude=["x"])
    )
    decision = decide(timing, 0, 10_500, lambda t: t + 1000)
    assert decision == Decision(0, 1000) and decision.owed is None
