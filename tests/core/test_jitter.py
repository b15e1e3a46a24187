"""Stable jitter (core/jitter.py): H in cron fields and spread_s offsets are functions of
the job's id alone, the same in every process, inside their ranges and flat over them."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest
from croniter import croniter

from shardsched.core.jitter import offset_ms, resolve_h
from shardsched.core.models import CronSchedule, IntervalSchedule, JobSpec
from shardsched.core.timing import timing_of

IDS = [f"job_{n:06x}" for n in range(2000)]


def test_h_takes_one_value_of_its_field_per_job_and_spreads_them() -> None:
    minutes = collections.Counter(int(resolve_h("H * * * *", j).split()[0]) for j in IDS)
    assert set(minutes) <= set(range(60)) and len(minutes) == 60  # every minute used
    assert max(minutes.values()) < 3 * 2000 / 60  # none crowded
    for j in IDS[:200]:
        low = resolve_h("H(0-29) 3 * * *", j).split()
        assert 0 <= int(low[0]) <= 29 and low[1] == "3"
        every = resolve_h("H/15 * * * *", j).split()[0]  # m-59/15 with m < 15
        start, _, step = every.partition("-")
        assert 0 <= int(start) < 15 and step == "59/15"
        day = resolve_h("0 0 H * *", j).split()[2]
        assert 1 <= int(day) <= 28  # in every month
        both = resolve_h("H H * * H(1-5)", j).split()
        assert croniter.is_valid(" ".join(both)) and 1 <= int(both[4]) <= 5
        assert int(both[1]) in range(24)


def test_fields_and_jobs_hash_apart() -> None:
    """The minute and the hour of ``H H * * *`` are not one number: 2,000 jobs use many
    (minute, hour) pairs, not 24."""
    pairs = {tuple(resolve_h("H H * * *", j).split()[:2]) for j in IDS}
    assert len(pairs) > 1000


@pytest.mark.parametrize(
    "bad", ["Hx * * * *", "H(5-70) * * * *", "H(9-3) * * * *", "H/0 * * * *", "H/61 * * * *"]
)
def test_malformed_h_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        resolve_h(bad, "job_1")


def test_the_same_job_lands_on_the_same_values_in_any_process() -> None:
    """Not Python's salted hash: another interpreter, with another hash seed, agrees."""
    here = [resolve_h("H H(0-5) * * *", j) for j in IDS[:50]] + [
        str(offset_ms(j, 60)) for j in IDS[:50]
    ]
    code = (
        "from shardsched.core.jitter import offset_ms, resolve_h\n"
        f"ids = {IDS[:50]!r}\n"
        "print('\\n'.join([resolve_h('H H(0-5) * * *', j) for j in ids]"
        " + [str(offset_ms(j, 60)) for j in ids]))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.splitlines()
    assert there == here


def test_spread_offsets_are_flat_over_the_spread() -> None:
    """25,000 jobs with spread_s 60: each second of the minute gets ~417 (the benchmark's
    histogram, bench/RESULTS.md, measures the fires themselves)."""
    per_second = collections.Counter(offset_ms(f"job_{n:08x}", 60) // 1000 for n in range(25_000))
    assert set(per_second) == set(range(60))
    assert min(per_second.values()) > 417 * 0.8 and max(per_second.values()) < 417 * 1.2
    assert offset_ms("job_1", 0) == 0


def test_a_jobs_timing_holds_its_h_resolved_and_its_spec_keeps_it() -> None:
    spec = JobSpec(name="h", command="true", schedule=CronSchedule(expression="H 3 * * *"))
    timing = timing_of(spec, "job_abc")
    assert timing.schedule.expression == resolve_h("H 3 * * *", "job_abc")  # type: ignore[union-attr]
    assert spec.schedule.expression == "H 3 * * *"  # type: ignore[union-attr]
    spread = JobSpec(name="s", command="true", schedule=IntervalSchedule(every_s=60), spread_s=30)
    assert timing_of(spread, "job_abc").spread_s == 30


def test_the_preview_shows_a_jobs_h_and_its_planned_times() -> None:
    from datetime import UTC, datetime

    from shardsched.core.models import SchedulePreviewRequest
    from shardsched.core.preview import preview

    after = datetime(2027, 1, 1, tzinfo=UTC)
    request = SchedulePreviewRequest(
        schedule=CronSchedule(expression="H * * * *"),
        count=3,
        after=after,
        job_id="job_abc",
        spread_s=30,
    )
    shown = preview(request, 0).fire_times
    minute = int(resolve_h("H * * * *", "job_abc").split()[0])
    assert [f.at.minute for f in shown] == [minute] * 3
    assert [f.at.hour for f in shown] == [0, 1, 2]
    off = offset_ms("job_abc", 30)
    assert all(
        f.planned is not None and (f.planned - f.at).total_seconds() * 1000 == off for f in shown
    )


def test_a_day_or_month_name_is_no_h_term() -> None:
    """``THU`` was read as an H term: ``0 9 * * THU``, ``MON-THU`` and ``JUN THU`` were
    refused with 422 (issue 48, repro 4) while ``thu`` worked. Names in any case are
    names; only ``H``, ``H(a-b)`` and ``H/n`` terms are H."""
    from datetime import UTC, datetime

    from shardsched.core.jitter import has_h
    from shardsched.core.schedule import cron_next_ms, parse_cron

    for expression in ("0 9 * * THU", "0 9 * * MON-THU", "0 9 * JUN THU", "0 9 * * Thu"):
        assert not has_h(expression), expression
        parse_cron(expression)
    thursday = cron_next_ms("0 9 * * THU", "UTC", 1796400000000)  # 2026-12-04 (a Friday)
    assert datetime.fromtimestamp(thursday / 1000, UTC) == datetime(2026, 12, 10, 9, tzinfo=UTC)
    assert has_h("H 9 * * THU") and resolve_h("H 9 * * THU", "j").endswith(" 9 * * THU")
    assert has_h("0 9 * * 1,H") and has_h("H(1-5)/2 * * * *")
