"""Named calendars on a real node and worker: an excluded day's ticks are skipped as
recorded ``calendar`` decisions (the ledger, the stats and the audit show them), a
calendar changed through the API decides the very next tick, an included calendar lets
only its days fire, and bad calendars or names are refused with nothing changed."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

from conftest import wait_until
from shardsched.core.instants import from_ms, to_ms
from waits import server_clock_passes


def _days_around(today: date) -> list[str]:
    """Yesterday, today and tomorrow: a test that runs across midnight stays inside."""
    return [(today + timedelta(days=d)).isoformat() for d in (-1, 0, 1)]


async def _today(redis) -> date:
    return from_ms(await redis.time_ms()).date()


async def _job(http, **body) -> str:
    spec = {"name": "cal", "command": "true", "schedule": {"type": "interval", "every_s": 0.5}}
    reply = await http.post("/api/v1/jobs", json={**spec, **body})
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def _skipped(http, job_id: str) -> int:
    stats = (await http.get(f"/api/v1/jobs/{job_id}/stats")).json()
    return stats["skipped"].get("calendar", 0)


async def test_an_excluded_day_skips_its_ticks_until_the_calendar_changes(
    node, worker, http, redis
) -> None:
    days = _days_around(await _today(redis))
    put = await http.put("/api/v1/calendars/freeze", json={"dates": days, "description": "x"})
    assert put.status_code == 201, put.text
    assert put.json()["dates"] == days
    job_id = await _job(http, calendars={"exclude": ["freeze"]})
    got = (await http.get(f"/api/v1/jobs/{job_id}")).json()
    assert got["calendars"] == {"exclude": ["freeze"]}

    async def some_skipped() -> bool:
        return await _skipped(http, job_id) >= 4

    await wait_until(some_skipped, timeout=20)
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
    assert runs == []
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    skipped = [t for t in ticks if t["outcome"] == "skipped"]
    assert skipped and all(t["reason"] == "calendar" for t in skipped), ticks

    # the freeze is lifted: the next tick fires, with nothing re-planned
    lifted = await http.put("/api/v1/calendars/freeze", json={"dates": ["2001-01-01"]})
    assert lifted.status_code == 200, lifted.text

    async def fired() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return len([r for r in runs if r["state"] == "succeeded"]) >= 3

    await wait_until(fired, timeout=20)
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_include_fires_only_on_the_calendars_days(node, worker, http, redis) -> None:
    today = await _today(redis)
    weekday = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    near = {today.weekday(), (today + timedelta(days=1)).weekday()}
    on = await http.put(
        "/api/v1/calendars/near", json={"weekdays": [weekday[d] for d in sorted(near)]}
    )
    assert on.status_code == 201, on.text
    far = await http.put(
        "/api/v1/calendars/far",
        json={"ranges": [{"start": "2001-01-01", "end": "2001-12-31"}]},
    )
    assert far.status_code == 201, far.text
    runs_on = await _job(http, calendars={"include": ["near"]})
    never = await _job(http, calendars={"include": ["far"]})

    async def both_decided() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{runs_on}/runs")).json()["runs"]
        return len(runs) >= 3 and await _skipped(http, never) >= 3

    await wait_until(both_decided, timeout=20)
    assert (await http.get(f"/api/v1/jobs/{never}/runs")).json()["runs"] == []
    assert await _skipped(http, runs_on) == 0

    # a deleted calendar has no day: the job that included "near" stops firing
    gone = await http.delete("/api/v1/calendars/near")
    assert gone.status_code == 200 and gone.json() == {"removed": "near"}
    assert (await http.get("/api/v1/calendars/near")).status_code == 404

    async def now_skipped() -> bool:
        return await _skipped(http, runs_on) >= 2

    await wait_until(now_skipped, timeout=20)
    listed = (await http.get("/api/v1/calendars")).json()["calendars"]
    assert [c["name"] for c in listed] == ["far"]
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_bad_calendars_and_names_are_refused(node, http) -> None:
    for name, body in [
        ("ok", {"ranges": [{"start": "2026-02-01", "end": "2026-01-01"}]}),
        ("ok", {"weekdays": ["funday"]}),
        ("ok", {"dates": ["2026-02-30"]}),
        ("ok", {"dates": "2026-01-01"}),
        ("ok", {"colour": "red"}),
        ("-bad", {}),
        ("a" * 65, {}),
        ("nul%00", {}),
    ]:
        reply = await http.put(f"/api/v1/calendars/{name}", json=body)
        assert reply.status_code == 422, (name, body, reply.text)
        assert "error" in reply.json()
    assert (await http.get("/api/v1/calendars")).json()["calendars"] == []
    spec = {"name": "c", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    missing = await http.post("/api/v1/jobs", json={**spec, "calendars": {"exclude": ["nope"]}})
    assert missing.status_code == 422 and "nope" in missing.text, missing.text
    hostile = await http.post("/api/v1/jobs", json={**spec, "calendars": {"include": ["a\u0000b"]}})
    assert hostile.status_code == 422, hostile.text
    assert (await http.get("/api/v1/jobs")).json()["jobs"] == []
    unknown = await http.post(
        "/api/v1/schedules/preview",
        json={"schedule": {"type": "interval", "every_s": 1}, "calendars": {"include": ["x"]}},
    )
    assert unknown.status_code == 422 and "no such calendar: x" in unknown.text
    assert (await http.get("/api/v1/calendars/none")).status_code == 404
    assert (await http.delete("/api/v1/calendars/none")).status_code == 404


async def test_the_cli_manages_calendars_and_jobs_name_them(node, http) -> None:
    from conftest import cli

    api = ("--api", str(http.base_url))
    made = await cli(
        http, "calendars", "set", "holidays", "--date", "2026-12-25", "--range",
        "2026-08-03..2026-08-14", "--weekday", "sun", "--description", "office", *api,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "calendar holidays set: sun 2026-08-03..2026-08-14 2026-12-25" in made.stdout
    listed = await cli(http, "calendars", "list", *api)
    assert "holidays" in listed.stdout and "office" in listed.stdout
    one = await cli(http, "calendars", "get", "holidays", *api, "--json")
    assert json.loads(one.stdout)["ranges"] == [{"start": "2026-08-03", "end": "2026-08-14"}]
    job = await cli(
        http, "jobs", "create", "weekdays", "--cron", "0 9 * * *", "--command", "true",
        "--calendar-exclude", "holidays", *api, "--json",
    )  # fmt: skip
    assert job.returncode == 0, job.stderr
    job_id = json.loads(job.stdout)["job_id"]
    preview = await http.post(
        "/api/v1/schedules/preview",
        json={
            "schedule": {"type": "cron", "expression": "0 9 * * *"},
            "after": "2026-12-24T12:00:00Z",
            "count": 2,
            "calendars": {"exclude": ["holidays"]},
        },
    )
    assert preview.status_code == 200, preview.text
    seen = preview.json()
    assert [f["at"][:10] for f in seen["fire_times"]] == ["2026-12-26", "2026-12-28"]
    assert [s["reason"] for s in seen["suppressed"]] == ["calendar", "calendar"]
    shown = await cli(http, "jobs", "get", job_id, *api)
    assert "calendars" in shown.stdout and "-holidays" in shown.stdout
    unknown = await cli(
        http, "jobs", "create", "x", "--every", "1m", "--command", "true",
        "--calendar-include", "nope", *api,
    )  # fmt: skip
    assert unknown.returncode != 0 and "no such calendar: nope" in unknown.stderr
    backwards = await cli(http, "calendars", "set", "b", "--range", "2026-02-01..2026-01-01", *api)
    assert backwards.returncode != 0 and "range" in backwards.stderr
    gone = await cli(http, "calendars", "rm", "holidays", *api)
    assert gone.returncode == 0 and "removed holidays" in gone.stdout
    again = await cli(http, "calendars", "rm", "holidays", *api)
    assert again.returncode != 0 and "not found" in again.stderr


async def test_a_resume_owes_only_the_ticks_its_calendars_allow(node, http, redis) -> None:
    days = _days_around(await _today(redis))
    assert (await http.put("/api/v1/calendars/freeze", json={"dates": days})).status_code == 201
    job_id = await _job(http, calendars={"exclude": ["freeze"]})
    paused = (await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})).json()
    # ticks of the pause go by (every 0.5 s), every one on a frozen day
    paused_at = datetime.fromisoformat(paused["paused_at"].replace("Z", "+00:00"))
    await server_clock_passes(redis, to_ms(paused_at) + 1500)
    url = f"/api/v1/jobs/{job_id}/resume"
    plan = (await http.post(url, json={"catchup": "all", "dry_run": True})).json()
    assert plan["owed"] == [], plan
    await http.put("/api/v1/calendars/freeze", json={"dates": ["2001-01-01"]})
    plan = (await http.post(url, json={"catchup": "all", "dry_run": True})).json()
    assert len(plan["owed"]) >= 2, plan  # lifted: the same ticks are owed
