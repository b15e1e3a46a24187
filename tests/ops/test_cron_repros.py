"""Issue 48's six repros, each by name, through ``POST /api/v1/schedules/preview`` (the
repros were found there) and the engine. Expected times worked out by hand from the
zones' published changes; the slow model agrees (tests/core/test_cron_reference.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import msgspec
import pytest

from shardsched.core.dst import suppressed_between
from shardsched.core.dst_policy import DstGap, DstPolicy
from shardsched.core.instants import to_ms
from shardsched.core.models import CronSchedule, Timing
from shardsched.core.schedule import NextFireMemo, cron_next_ms, parse_cron


async def _preview(http: httpx.AsyncClient, schedule: dict, after: str, count: int = 4) -> dict:
    reply = await http.post(
        "/api/v1/schedules/preview", json={"schedule": schedule, "after": after, "count": count}
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def _local(answer: dict) -> list[tuple[str, Any]]:
    return [(f["local"], f["dst"]) for f in answer["fire_times"]]


def _cron(expression: str, zone: str, **more: Any) -> dict:
    return {"type": "cron", "expression": expression, "timezone": zone, **more}


async def test_repro_1_every_match_inside_a_gap_fires(http: httpx.AsyncClient) -> None:
    answer = await _preview(http, _cron("0,30 2 * * *", "America/New_York"), "2026-03-08T05:00:00Z")
    assert _local(answer)[:3] == [
        ("2026-03-08T03:00:00-04:00", "dst_shifted"),
        ("2026-03-08T03:30:00-04:00", "dst_shifted"),
        ("2026-03-09T02:00:00-04:00", None),
    ]
    london = await _preview(http, _cron("*/15 1 * * *", "Europe/London"), "2026-03-29T00:00:00Z")
    assert [t for t, _ in _local(london)] == [  # the wildcard-minute job is fixed-hour: shifted
        "2026-03-29T02:00:00+01:00",
        "2026-03-29T02:15:00+01:00",
        "2026-03-29T02:30:00+01:00",
        "2026-03-29T02:45:00+01:00",
    ]
    apia = await _preview(http, _cron("0 6,18 30 12 *", "Pacific/Apia"), "2011-12-29T00:00:00Z")
    assert _local(apia)[:2] == [
        ("2011-12-31T06:00:00+14:00", "dst_shifted"),  # 30 December 2011 did not happen there
        ("2011-12-31T18:00:00+14:00", "dst_shifted"),
    ]


async def test_repro_2_the_schedule_lives_on(http: httpx.AsyncClient) -> None:
    skip = _cron("30 2 * * 0#2", "America/New_York", dst={"gap": "skip"})
    answer = await _preview(http, skip, "2026-02-01T00:00:00Z", 3)
    assert [t for t, _ in _local(answer)] == [
        "2026-02-08T02:30:00-05:00",  # the tick before the gap fires
        "2026-04-12T02:30:00-04:00",  # March's second Sunday 02:30 does not exist: skipped
        "2026-05-10T02:30:00-04:00",
    ]
    assert answer["suppressed"] == [{"wall_time": "2026-03-08T02:30:00", "reason": "dst_gap"}]
    # zones whose clocks jump at midnight (a wildcard hour: the gap's 00:00 is skipped)
    for zone, eve, day, week_on in [
        ("America/Santiago", "2026-09-05", "2026-09-06", "2026-09-13"),
        ("Asia/Beirut", "2026-03-28", "2026-03-29", "2026-04-05"),
        ("America/Havana", "2026-03-07", "2026-03-08", "2026-03-15"),
    ]:
        sundays = await _preview(http, _cron("0 */24 * * 0", zone), f"{eve}T00:00:00Z", 1)
        assert sundays["fire_times"][0]["local"].startswith(f"{week_on}T00:00:00"), zone
        assert sundays["suppressed"] == [{"wall_time": f"{day}T00:00:00", "reason": "dst_gap"}]


def test_repro_2_on_a_node_the_tick_before_the_gap_has_a_next() -> None:
    """What the shard actor computes after firing a tick (its memo, from the stored
    timing): the tick before the gap used to raise there, and the job was quarantined."""
    timing = Timing(
        schedule=CronSchedule(
            expression="30 2 * * 0#2", timezone="America/New_York", dst=DstPolicy(gap=DstGap.SKIP)
        )
    )
    memo = NextFireMemo()
    before_gap = to_ms(datetime.fromisoformat("2027-02-14T02:30:00-05:00"))
    after_gap = to_ms(datetime.fromisoformat("2027-04-11T02:30:00-04:00"))
    assert memo.next_after(msgspec.json.encode(timing), before_gap) == after_gap


def test_repro_3_lord_howe_30_minute_gap() -> None:
    t = to_ms(datetime.fromisoformat("2026-10-03T14:00:00+00:00"))
    out = []
    for _ in range(3):
        t = cron_next_ms("20,40 2 * * *", "Australia/Lord_Howe", t)
        out.append(t)
    # 02:00 -> 02:30 on 4 October: 02:20 shifted to 02:50, 02:40 exists and fires first
    assert out[1] - out[0] == 10 * 60_000 and out[2] - out[1] == 23 * 3600_000 + 30 * 60_000


async def test_repro_4_thu_is_thursday(http: httpx.AsyncClient) -> None:
    for expression in ("0 9 * * THU", "0 9 * * MON-THU", "0 9 * JUN THU", "0 9 * * thu"):
        answer = await _preview(http, _cron(expression, "UTC"), "2026-06-01T00:00:00Z", 1)
        assert answer["fire_times"], expression


@pytest.mark.parametrize(
    ("expression", "days"),
    [
        ("0 0 1,15 * 5#3", ["2026-01-01", "2026-01-15", "2026-01-16", "2026-02-01"]),
        ("0 0 1 * 5#3", ["2026-01-01", "2026-01-16", "2026-02-01", "2026-02-20"]),
        ("0 0 4 * 6#2", ["2026-01-04", "2026-01-10", "2026-02-04", "2026-02-14"]),
        ("0 0 10W * 1-4", ["2026-01-01", "2026-01-05", "2026-01-06", "2026-01-07"]),
        ("0 0 L * 1", ["2026-01-05", "2026-01-12", "2026-01-19", "2026-01-26"]),
    ],
)
async def test_repro_5_day_of_month_with_hash_l_or_w_is_or(
    http: httpx.AsyncClient, expression: str, days: list[str]
) -> None:
    answer = await _preview(http, _cron(expression, "UTC"), "2025-12-31T12:00:00Z")
    assert [f["at"][:10] for f in answer["fire_times"]] == days


async def test_repro_6_apia_24_hour_gap_is_said(http: httpx.AsyncClient) -> None:
    shifted = await _preview(http, _cron("0 12 * * *", "Pacific/Apia"), "2011-12-29T00:00:00Z", 3)
    assert _local(shifted) == [
        ("2011-12-29T12:00:00-10:00", None),
        ("2011-12-31T12:00:00+14:00", "dst_shifted"),  # the 30th's noon, 24 h on
        ("2012-01-01T12:00:00+14:00", None),
    ]
    skipped = await _preview(
        http, _cron("0 12 * * *", "Pacific/Apia", dst={"gap": "skip"}), "2011-12-29T00:00:00Z", 2
    )
    assert skipped["suppressed"] == [{"wall_time": "2011-12-30T12:00:00", "reason": "dst_gap"}]
    hourly = await _preview(http, _cron("0 * * * *", "Pacific/Apia"), "2011-12-30T09:30:00Z", 24)
    assert hourly["fire_times"][0]["local"] == "2011-12-31T00:00:00+14:00"
    assert hourly["suppressed"] == [  # every hour of the day that was not, not only 3 of them
        {"wall_time": f"2011-12-30T{h:02}:00:00", "reason": "dst_gap"} for h in range(24)
    ]
    # the ledger's skipped ticks come from the same decision (the audit, /jobs/{id}/ticks)
    found = suppressed_between(
        parse_cron("0 * * * *"),
        "Pacific/Apia",
        msgspec.UNSET,
        datetime.fromisoformat("2011-12-30T00:00:00+00:00"),
        datetime.fromisoformat("2012-01-01T00:00:00+00:00"),
    )
    assert [s.wall.hour for s in found] == list(range(24))


async def test_never_firing_expressions_are_refused_naming_the_field(
    http: httpx.AsyncClient,
) -> None:
    for expression in ("0 0 30 2 *", "0 0 31 H *", "0 0 L-30 2 *"):
        body = {"schedule": _cron(expression, "UTC")}
        reply = await http.post("/api/v1/schedules/preview", json=body)
        assert reply.status_code == 422, (expression, reply.text)
        assert "$.schedule.expression" in reply.text, reply.text


# -- what the independent tester found at the edges (black-box, against the docs) --------


async def test_of_several_specs_a_wall_time_one_fires_is_not_listed_skipped(
    http: httpx.AsyncClient,
) -> None:
    both = {
        "type": "multi",
        "schedules": [
            _cron("30 1 * * *", "America/New_York", dst={"repeat": "second"}),
            _cron("30 1 * * *", "America/New_York"),
        ],
    }
    answer = await _preview(http, both, "2026-11-01T04:00:00Z", 2)
    assert [t for t, _ in _local(answer)] == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:30:00-05:00",
    ]
    assert answer["suppressed"] == []


async def test_a_window_schedule_says_its_dst_decisions(http: httpx.AsyncClient) -> None:
    window = {"type": "window", "cron": "30 2 * * *", "timezone": "America/New_York"}
    spring = await _preview(http, {**window, "duration_s": 3600}, "2026-03-08T05:00:00Z", 1)
    assert _local(spring) == [("2026-03-08T03:30:00-04:00", "dst_shifted")]
    fall = {**window, "cron": "30 1 * * *", "duration_s": 600}
    autumn = await _preview(http, fall, "2026-11-01T04:00:00Z", 2)
    assert autumn["suppressed"] == [
        {"wall_time": "2026-11-01T01:30:00", "reason": "dst_repeat_skipped"}
    ]


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"type": "window", "cron": "*/0 * * * *", "duration_s": 60}, "$.schedule.cron"),
        ({"type": "window", "cron": "0 0 30 2 *", "duration_s": 60}, "$.schedule.cron"),
        (_cron("0\n0 * * *", "UTC"), "$.schedule.expression"),
        (_cron("0 0\u00a0* * *", "UTC"), "$.schedule.expression"),
        (_cron("0 0 * * *\u2028", "UTC"), "$.schedule.expression"),
        (_cron("0 0 ?/2 * *", "UTC"), "$.schedule.expression"),
        (_cron("0 0 * * *", "localtime"), "$.schedule.timezone"),
        (_cron("0 0 * * *", "posixrules"), "$.schedule.timezone"),
    ],
)
async def test_bad_schedules_are_refused_naming_their_field(
    http: httpx.AsyncClient, schedule: dict, field: str
) -> None:
    reply = await http.post("/api/v1/schedules/preview", json={"schedule": schedule})
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["details"]["field"] == field, reply.text


async def test_an_h_month_that_never_fires_for_some_job_says_what_was_written(
    http: httpx.AsyncClient,
) -> None:
    reply = await http.post(
        "/api/v1/schedules/preview", json={"schedule": _cron("0 0 31 H *", "UTC")}
    )
    assert reply.status_code == 422, reply.text
    assert "for a job whose H makes it '0 0 31 2 *'" in reply.text, reply.text
