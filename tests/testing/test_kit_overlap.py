"""The test kit's overlap model (testing/overlap.py): a job every 10 minutes whose runs
take 25 minutes, under each overlap rule, against timelines worked out by hand from the
documented rules (core/models.Overlap, docs/concepts.md), not by running the model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shardsched import CronSchedule, JobSpec
from shardsched.testing import simulate

START = datetime(2026, 1, 1, tzinfo=UTC)


def job(overlap: str) -> JobSpec:
    return JobSpec(
        name="slow", schedule=CronSchedule(expression="*/10 * * * *"), command="x",
        overlap=overlap,
    )  # fmt: skip


def timeline(overlap: str, minutes: int = 60) -> list[tuple]:
    """(tick, outcome, reason, started, ended, buffered, cancelled), times in minutes."""
    sim = simulate(
        job(overlap), START, timedelta(minutes=minutes), durations={"slow": timedelta(minutes=25)}
    )

    def m(ms: int | None) -> int | None:
        return None if ms is None else (ms - int(START.timestamp() * 1000)) // 60_000

    return [
        (m(t.at_ms), t.outcome, t.reason, m(t.fired_ms), m(t.ended_ms), t.buffered, t.cancelled)
        for t in sorted(sim, key=lambda t: t.at_ms)
    ]


# Ticks at 10, 20, 30, 40, 50, 60 (the clock starts at 00:00: its first tick is 00:10).
HAND = {
    "allow": [  # each runs 25 minutes, beside the others
        (10, "fired", None, 10, 35, False, False),
        (20, "fired", None, 20, 45, False, False),
        (30, "fired", None, 30, 55, False, False),
        (40, "fired", None, 40, 65, False, False),
        (50, "fired", None, 50, 75, False, False),
        (60, "fired", None, 60, 85, False, False),
    ],
    "forbid": [  # 10 runs to 35: 20, 30 skipped; 40 runs to 65: 50, 60 skipped
        (10, "fired", None, 10, 35, False, False),
        (20, "skipped", "overlap", None, None, False, False),
        (30, "skipped", "overlap", None, None, False, False),
        (40, "fired", None, 40, 65, False, False),
        (50, "skipped", "overlap", None, None, False, False),
        (60, "skipped", "overlap", None, None, False, False),
    ],
    "replace": [  # each stops the one before it
        (10, "fired", None, 10, 20, False, True),
        (20, "fired", None, 20, 30, False, True),
        (30, "fired", None, 30, 40, False, True),
        (40, "fired", None, 40, 50, False, True),
        (50, "fired", None, 50, 60, False, True),
        (60, "fired", None, 60, 85, False, False),
    ],
    "buffer_one": [  # 20 waits for 10 (ends 35), runs 35-60; 30 full; 40 waits, runs
        (10, "fired", None, 10, 35, False, False),  # 60-85 (a run ending at a tick's
        (20, "fired", None, 35, 60, True, False),  # instant ends first); 50 full; 60 waits
        (30, "skipped", "overlap_buffer_full", None, None, False, False),
        (40, "fired", None, 60, 85, True, False),
        (50, "skipped", "overlap_buffer_full", None, None, False, False),
        (60, "buffered", None, None, None, True, False),
    ],
    "buffer_all": [  # each waits its turn: 35, 60, 85, 110, ... (past the span: waiting)
        (10, "fired", None, 10, 35, False, False),
        (20, "fired", None, 35, 60, True, False),
        (30, "fired", None, 60, 85, True, False),
        (40, "buffered", None, None, None, True, False),
        (50, "buffered", None, None, None, True, False),
        (60, "buffered", None, None, None, True, False),
    ],
    "cancel_other": [  # as replace, the new one once the other stopped (at once here)
        (10, "fired", None, 10, 20, False, True),
        (20, "fired", None, 20, 30, True, True),
        (30, "fired", None, 30, 40, True, True),
        (40, "fired", None, 40, 50, True, True),
        (50, "fired", None, 50, 60, True, True),
        (60, "fired", None, 60, 85, True, False),
    ],
}


@pytest.mark.parametrize("overlap", sorted(HAND))
def test_each_overlap_rule_against_a_timeline_worked_by_hand(overlap: str) -> None:
    assert timeline(overlap) == HAND[overlap]


def test_buffer_one_at_the_span_end_and_durations_by_tick() -> None:
    """A buffered tick whose turn comes after the span is still ``buffered`` with no
    start; a duration may depend on the tick (a long run at the top of the hour)."""
    got = timeline("buffer_one", minutes=45)
    assert got[-1] == (40, "buffered", None, None, None, True, False)  # its turn: 60
    sim = simulate(
        job("forbid"), START, timedelta(minutes=60),
        durations={"slow": lambda t: timedelta(minutes=45 if t.at.minute == 10 else 5)},
    )  # fmt: skip
    assert [(t.at.minute, t.outcome) for t in sim] == [
        (10, "fired"), (20, "skipped"), (30, "skipped"), (40, "skipped"), (50, "skipped"),
        (0, "fired"),
    ]  # fmt: skip


def test_without_durations_runs_take_no_time() -> None:
    sim = simulate(job("forbid"), START, timedelta(minutes=60))
    assert [t.outcome for t in sim] == ["fired"] * 6
    assert all(t.ended_ms is None for t in sim)


def test_what_the_kit_refuses_found_by_an_independent_tester() -> None:
    """A duration for no job (a typo would test nothing), a negative or non-timedelta
    one, a naive instant, the same job twice: each a clear error, not a silent pass."""
    from shardsched.testing import VirtualClock

    span = timedelta(minutes=30)
    for durations, error, said in (
        ({"slwo": timedelta(minutes=5)}, ValueError, "durations for no job"),
        ({"slow": timedelta(minutes=-5)}, ValueError, "cannot take"),
        ({"slow": 5}, TypeError, "a timedelta or a function"),
        ({"slow": lambda t: None}, TypeError, "a timedelta, not NoneType"),
    ):
        with pytest.raises(error, match=said):
            simulate(job("forbid"), START, span, durations=durations)
    with pytest.raises(ValueError, match="aware"):
        simulate(job("forbid"), START, span, outages=[(datetime(2026, 1, 1), span)])
    with pytest.raises(ValueError, match="aware"):
        VirtualClock(job("forbid"), START).sleep_until(datetime(2026, 1, 2))
    with pytest.raises(ValueError, match="given twice"):
        simulate([job("forbid"), job("forbid")], START, span)
