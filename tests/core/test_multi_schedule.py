"""Several specs per schedule (``type: multi``), pure: the ticks are the union of its cron
specs' (one where two match the same instant), each spec with its own zone, DST policy
and ``H``; a bad spec is refused naming which one."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from shardsched.core.dst_policy import DstGap, DstPolicy
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.models import CronSchedule, JobSpec, MultiSchedule, SchedulePreviewRequest
from shardsched.core.preview import preview
from shardsched.core.schedule import first_fire_ms, next_fire_ms
from shardsched.core.ticks import ticks_in
from shardsched.core.timing import per_job, resolved
from shardsched.core.validation import validate_spec

WEEK = MultiSchedule(
    schedules=[
        CronSchedule("0 9 * * 1-5"),  # 09:00 UTC on weekdays
        CronSchedule("0 11 * * 6,0", "Europe/Berlin"),  # 11:00 Berlin at weekends
        CronSchedule("0 9 * * 1"),  # again Monday 09:00: the same instant, one tick
    ]
)


def _walk(schedule, after: datetime, n: int) -> list[str]:
    out, tick = [], first_fire_ms(schedule, to_ms(after))
    while tick is not None and len(out) < n:
        out.append(from_ms(tick).isoformat())
        tick = next_fire_ms(schedule, tick)
    return out


def test_the_ticks_are_the_union_of_its_specs() -> None:
    assert _walk(WEEK, datetime(2026, 12, 24, 12, tzinfo=UTC), 6) == [
        "2026-12-25T09:00:00+00:00",  # Friday
        "2026-12-26T10:00:00+00:00",  # Saturday 11:00 CET
        "2026-12-27T10:00:00+00:00",
        "2026-12-28T09:00:00+00:00",  # Monday: two specs, one tick
        "2026-12-29T09:00:00+00:00",
        "2026-12-30T09:00:00+00:00",
    ]
    lo, hi = to_ms(datetime(2026, 12, 24, tzinfo=UTC)), to_ms(datetime(2026, 12, 31, tzinfo=UTC))
    assert len(list(ticks_in(WEEK, lo, lo, hi))) == 7  # the audit's walk agrees


def test_a_spec_that_has_ended_leaves_the_others() -> None:
    ended = MultiSchedule(schedules=[CronSchedule("0 0 1 1 *"), CronSchedule("30 6 * * *")])
    got = _walk(ended, datetime(2026, 12, 31, 12, tzinfo=UTC), 3)
    assert got == [
        "2027-01-01T00:00:00+00:00",
        "2027-01-01T06:30:00+00:00",
        "2027-01-02T06:30:00+00:00",
    ]


def test_each_spec_keeps_its_own_h_and_dst() -> None:
    spec = MultiSchedule(
        schedules=[
            CronSchedule("H 3 * * *"),
            CronSchedule("30 2 * * *", "Europe/Berlin", dst=DstPolicy(gap=DstGap.SKIP)),
        ]
    )
    assert per_job(spec)
    mine = resolved(spec, "job_a")
    assert isinstance(mine, MultiSchedule) and "H" not in mine.schedules[0].expression
    assert mine.schedules[1] == spec.schedules[1]
    body = {
        "schedule": msgspec.to_builtins(spec),
        "after": "2026-03-28T12:00:00Z",
        "count": 4,
        "job_id": "job_a",
    }
    got = preview(msgspec.convert(body, SchedulePreviewRequest), 0)
    assert ("2026-03-29T02:30:00", "dst_gap") in [(s.wall_time, s.reason) for s in got.suppressed]


@pytest.mark.parametrize(
    ("schedules", "path"),
    [
        ([{"type": "cron", "expression": "0 9 * * *"},
          {"type": "cron", "expression": "61 * * * *"}],
         "$.schedule.schedules[1].expression"),
        ([{"type": "cron", "expression": "0 9 * * *", "timezone": "Mars/Base"}],
         "$.schedule.schedules[0].timezone"),
    ],
)  # fmt: skip
def test_a_bad_spec_is_refused_by_its_path(schedules: list, path: str) -> None:
    spec = msgspec.convert(
        {"name": "m", "command": "true", "schedule": {"type": "multi", "schedules": schedules}},
        JobSpec,
    )
    with pytest.raises(msgspec.ValidationError, match=path.replace("[", r"\[").replace("$", r"\$")):
        validate_spec(spec)


def test_an_empty_or_mixed_multi_does_not_decode() -> None:
    for schedules in ([], [{"type": "interval", "every_s": 60}]):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert({"type": "multi", "schedules": schedules}, MultiSchedule)
