"""POST /api/v1/schedules/preview and Client.next_fire_times: the fire times the scheduler
will use, DST moves and suppressions called out (issue #7)."""

from __future__ import annotations

from datetime import UTC, datetime

import trio

from shardsched import Client
from shardsched.core.instants import to_ms
from shardsched.core.models import CronSchedule, IntervalSchedule, SchedulePreviewRequest
from shardsched.core.preview import preview
from shardsched.core.schedule import next_fire_ms


def berlin(expression: str, after: str, count: int) -> dict:
    schedule = CronSchedule(expression=expression, timezone="Europe/Berlin")
    request = SchedulePreviewRequest(
        schedule=schedule, count=count, after=datetime.fromisoformat(after)
    )
    result = preview(request, 0)
    # exactly the chain of fire times the shard actor computes
    chain = [to_ms(result.fire_times[0].at)]
    while len(chain) < count:
        chain.append(next_fire_ms(schedule, chain[-1]))
    assert [to_ms(f.at) for f in result.fire_times] == chain
    return {
        "fires": [(f.local.isoformat(), f.dst) for f in result.fire_times],
        "suppressed": [(s.wall_time, s.reason) for s in result.suppressed],
    }


def test_fixed_hour_job_across_both_changes() -> None:
    spring = berlin("30 2 * * *", "2026-03-28T12:00:00Z", 2)
    assert spring["fires"] == [
        ("2026-03-29T03:30:00+02:00", "dst_shifted"),
        ("2026-03-30T02:30:00+02:00", None),
    ]
    assert spring["suppressed"] == []
    autumn = berlin("30 2 * * *", "2026-10-24T12:00:00Z", 2)
    assert autumn["fires"] == [
        ("2026-10-25T02:30:00+02:00", None),
        ("2026-10-26T02:30:00+01:00", None),
    ]
    assert autumn["suppressed"] == [("2026-10-25T02:30:00", "dst_repeat_skipped")]


def test_wildcard_hour_job_across_both_changes() -> None:
    spring = berlin("0 * * * *", "2026-03-29T00:30:00Z", 2)
    assert spring["fires"] == [
        ("2026-03-29T03:00:00+02:00", None),
        ("2026-03-29T04:00:00+02:00", None),
    ]
    spring_wide = berlin("0 * * * *", "2026-03-28T23:30:00Z", 3)
    assert spring_wide["suppressed"] == [("2026-03-29T02:00:00", "dst_gap")]
    autumn = berlin("0 * * * *", "2026-10-24T23:30:00Z", 3)
    assert autumn["fires"] == [
        ("2026-10-25T02:00:00+02:00", None),
        ("2026-10-25T02:00:00+01:00", "dst_repeated"),
        ("2026-10-25T03:00:00+01:00", None),
    ]


def test_interval_preview_keeps_its_phase() -> None:
    schedule = IntervalSchedule(every_s=600, start_at=datetime(2026, 1, 1, 0, 5, tzinfo=UTC))
    request = SchedulePreviewRequest(
        schedule=schedule, count=3, after=datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    )
    fires = [f.at.isoformat() for f in preview(request, 0).fire_times]
    assert fires == [
        "2026-01-01T01:05:00+00:00",
        "2026-01-01T01:15:00+00:00",
        "2026-01-01T01:25:00+00:00",
    ]


async def test_preview_over_http_and_sdk(http, redis_server, dep) -> None:
    body = {
        "schedule": {"type": "cron", "expression": "30 2 * * *", "timezone": "Europe/Berlin"},
        "count": 3,
        "after": "2026-03-28T12:00:00Z",
    }
    reply = await http.post("/api/v1/schedules/preview", json=body)
    assert reply.status_code == 200, reply.text
    fires = reply.json()["fire_times"]
    assert fires[0] == {
        "at": "2026-03-29T01:30:00Z",
        "local": "2026-03-29T03:30:00+02:00",
        "dst": "dst_shifted",
        "planned": None,  # no spread
        "window_closes": None,  # not a window schedule
    }
    skip = {**body, "schedule": {**body["schedule"], "dst": {"gap": "skip"}}}
    reply = await http.post("/api/v1/schedules/preview", json=skip)
    assert reply.status_code == 200, reply.text
    assert reply.json()["fire_times"][0]["at"] == "2026-03-30T00:30:00Z"
    assert reply.json()["suppressed"] == [{"wall_time": "2026-03-29T02:30:00", "reason": "dst_gap"}]
    now = await http.post(
        "/api/v1/schedules/preview", json={"schedule": {"type": "interval", "every_s": 60}}
    )
    assert now.status_code == 200 and len(now.json()["fire_times"]) == 10
    for bad, field in [
        ({**body, "count": 0}, "$.count"),
        ({**body, "count": 1001}, "$.count"),
        ({**body, "after": "2026-03-28T12:00:00"}, "$.after"),
        ({**body, "schedule": {"type": "cron", "expression": "* * *"}}, "$.schedule.expression"),
        (
            {**body, "schedule": {"type": "cron", "expression": "* * * * *", "timezone": "Mars/X"}},
            "$.schedule.timezone",
        ),
        ({**body, "colour": 1}, "$.colour"),
        ({**body, "schedule": {**body["schedule"], "dst": {"gap": "later"}}}, "$.schedule.dst.gap"),
    ]:
        reply = await http.post("/api/v1/schedules/preview", json=bad)
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["details"]["field"] == field

    client = await trio.to_thread.run_sync(Client, redis_server.url, dep.namespace)
    try:
        result = await trio.to_thread.run_sync(
            lambda: client.next_fire_times(
                CronSchedule(expression="0 * * * *", timezone="Europe/Berlin"),
                count=3,
                after=datetime(2026, 10, 24, 23, 30, tzinfo=UTC),
            )
        )
        assert [f.dst for f in result.fire_times] == [None, "dst_repeated", None]
    finally:
        client.close()
