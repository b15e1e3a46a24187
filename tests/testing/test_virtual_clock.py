"""shardsched.testing: a virtual clock over the real core. The expectations are worked out
by hand from the documented rules (docs/concepts.md: catch-up policies, calendars, DST;
the zones' offsets), not by running the code under test; the DST tables of
tests/core/test_dst_policy.py are run through it too."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from shardsched import Calendar, CronSchedule, IntervalSchedule, JobSpec
from shardsched.core.calendars import CalendarRule
from shardsched.testing import VirtualClock, simulate


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def hourly(catchup: str, **more) -> JobSpec:
    return JobSpec(
        name=f"hourly-{catchup}",
        schedule=CronSchedule(expression="0 * * * *"),
        command="true",
        catchup=catchup,
        **more,
    )


OUTAGE = [(z("2026-01-01T02:30"), timedelta(hours=3))]  # down 02:30-05:30: 03, 04, 05 due


def table(ticks) -> list[tuple[str, str, str | None, str | None]]:
    return [
        (
            t.at.strftime("%H:%M"),
            t.outcome,
            t.reason,
            None if t.fired_at is None else t.fired_at.strftime("%H:%M:%S"),
        )
        for t in ticks
    ]


def test_catchup_none_skips_what_the_outage_passed_over() -> None:
    sim = simulate([hourly("none")], z("2026-01-01T00:30"), timedelta(hours=6), OUTAGE)
    assert table(sim) == [
        ("01:00", "fired", None, "01:00:00"),
        ("02:00", "fired", None, "02:00:00"),
        ("03:00", "skipped", "misfire", None),
        ("04:00", "skipped", "misfire", None),
        ("05:00", "skipped", "misfire", None),
        ("06:00", "fired", None, "06:00:00"),
    ]


def test_catchup_latest_runs_the_last_one_late_and_skips_the_rest() -> None:
    sim = simulate([hourly("latest")], z("2026-01-01T02:10"), timedelta(hours=4), OUTAGE)
    assert table(sim) == [
        ("03:00", "skipped", "catchup_latest", None),
        ("04:00", "skipped", "catchup_latest", None),
        ("05:00", "fired", None, "05:30:00"),
        ("06:00", "fired", None, "06:00:00"),
    ]
    assert [t.late for t in sim] == [False, False, True, False]


def test_catchup_all_runs_each_late_and_paced_at_its_rate() -> None:
    sim = simulate([hourly("all")], z("2026-01-01T02:10"), timedelta(hours=4), OUTAGE)
    assert table(sim) == [
        ("03:00", "fired", None, "05:30:00"),
        ("04:00", "fired", None, "05:30:00"),
        ("05:00", "fired", None, "05:30:00"),
        ("06:00", "fired", None, "06:00:00"),
    ]
    paced = hourly("paced", catchup_per_minute=2)
    sim = simulate([paced], z("2026-01-01T02:10"), timedelta(hours=4), OUTAGE)
    assert table(sim)[:3] == [  # two a minute from the outage's end
        ("03:00", "fired", None, "05:30:00"),
        ("04:00", "fired", None, "05:30:30"),
        ("05:00", "fired", None, "05:31:00"),
    ]


def test_a_calendar_a_window_and_max_fires_end_or_skip_ticks() -> None:
    weekdays_only = JobSpec(
        name="business",
        schedule=CronSchedule(expression="0 9 * * *", timezone="Europe/Berlin"),
        command="true",
        calendars=CalendarRule(exclude=["weekend"]),
    )
    weekend = Calendar(weekdays=["sat", "sun"])
    sim = simulate(
        [weekdays_only], z("2026-12-04T00:00"), timedelta(days=4), calendars={"weekend": weekend}
    )
    # Friday 4th, Saturday 5th, Sunday 6th, Monday 7th of December 2026, 09:00 CET = 08:00Z
    assert [(t.local.date(), t.outcome, t.reason) for t in sim] == [
        (date(2026, 12, 4), "fired", None),
        (date(2026, 12, 5), "skipped", "calendar"),
        (date(2026, 12, 6), "skipped", "calendar"),
        (date(2026, 12, 7), "fired", None),
    ]
    three = JobSpec(
        name="thrice", schedule=IntervalSchedule(every_s=60), command="true", max_fires=3
    )
    assert len(simulate([three], z("2026-01-01T00:00"), timedelta(hours=1)).fired()) == 3


def test_dst_shifted_repeated_and_debian_ticks_are_named() -> None:
    """2026-03-29 Berlin skips 02:00-03:00 and 2026-10-25 repeats 02:00-03:00 (CEST +2 to
    CET +1): 02:30 shifts to 03:30 CEST by default, fires at the gap's end (03:00 CEST)
    in the debian dialect, and fires once on the repeated day, at its first occurrence."""
    ours = CronSchedule(expression="30 2 * * *", timezone="Europe/Berlin")
    debian = CronSchedule(expression="30 2 * * *", timezone="Europe/Berlin", dialect="debian")
    jobs = {
        "ours": JobSpec(name="ours", schedule=ours, command="true"),
        "debian": JobSpec(name="debian", schedule=debian, command="true"),
    }
    spring = simulate(jobs, z("2026-03-28T12:00"), timedelta(days=1))
    assert {t.job: (t.local.strftime("%H:%M %Z"), t.dst) for t in spring} == {
        "ours": ("03:30 CEST", "dst_shifted"),
        "debian": ("03:00 CEST", "dst_shifted"),
    }
    fall = simulate(jobs["ours"], z("2026-10-24T12:00"), timedelta(days=1))
    assert [(t.at, t.outcome) for t in fall] == [
        (z("2026-10-25T00:30"), "fired"),  # 02:30 CEST
        (z("2026-10-25T01:30"), "skipped"),  # 02:30 CET: the second occurrence
    ]


def test_the_verbs_move_one_clock_as_simulate_does(tmp_path) -> None:
    spec = hourly("latest")
    clock = VirtualClock([spec], z("2026-01-01T02:10"))
    assert clock.sleep_until(z("2026-01-01T02:30")) == []
    assert [t.outcome for t in clock.outage(timedelta(hours=3))] == ["skipped"] * 2 + ["fired"]
    assert [t.at for t in clock.skip_time(timedelta(minutes=30))] == [z("2026-01-01T06:00")]
    assert clock.now == z("2026-01-01T06:00")
    assert clock.ticks == simulate(
        [spec], z("2026-01-01T02:10"), timedelta(hours=3, minutes=50), OUTAGE
    )
    with pytest.raises(ValueError, match="before the clock's now"):
        clock.sleep_until(z("2026-01-01T00:00"))
    # jobs from an apply file, as shardsched apply takes them
    (tmp_path / "jobs.yaml").write_text(
        "kind: job\nid: nightly\nname: nightly\ncommand: 'true'\n"
        "schedule: {type: cron, expression: '0 2 * * *'}\n"
    )
    sim = simulate(tmp_path / "jobs.yaml", z("2026-01-01T00:00"), timedelta(days=3))
    assert [t.at for t in sim.fired("nightly")] == [z(f"2026-01-0{d}T02:00") for d in (1, 2, 3)]


def test_a_spread_job_starts_at_its_planned_time() -> None:
    spread = JobSpec(
        name="spread", schedule=CronSchedule(expression="0 * * * *"), command="true", spread_s=600
    )
    sim = simulate({"spread-1": spread}, z("2026-01-01T00:00"), timedelta(hours=3))
    offsets = {t.fired_ms - t.at_ms for t in sim}
    assert len(offsets) == 1 and 0 <= offsets.pop() < 600_000


def test_a_year_of_a_minutely_job(virtual_clock) -> None:
    """Every minute of 2026 in Berlin: 525,600 minutes; the spring gap's 60 wall minutes
    do not exist (skipped, dst_gap for a wildcard job) and the fall's 60 fire twice."""
    minutely = JobSpec(
        name="m",
        schedule=CronSchedule(expression="* * * * *", timezone="Europe/Berlin"),
        command="true",
    )
    # registered at 23:59 CET on New Year's Eve: its first tick is 00:00 CET, its last
    # (365 days on) 23:59 CET on 31 December
    clock = virtual_clock([minutely], z("2025-12-31T22:59"))
    ticks = clock.skip_time(timedelta(days=365))
    fired = [t for t in ticks if t.outcome == "fired"]
    assert len(fired) == 525_600
    assert len([t for t in ticks if t.outcome == "skipped"]) == 60
    assert len([t for t in fired if t.dst == "dst_repeated"]) == 60


def test_the_testing_page_runs_as_printed(tmp_path) -> None:
    """docs/testing.md's worked example, executed as a user runs it."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    (code,) = re.findall(r"```python testing\n(.*?)```", page, re.DOTALL)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "3 ticks, all run: True\n"
