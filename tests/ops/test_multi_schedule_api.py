"""Several specs per schedule on a real node: created through the API and the CLI, shown
and previewed as one schedule, and (slow: it waits on minute boundaries) fired once per
instant where two specs match it, with the audit clean."""

from __future__ import annotations

import json

import pytest

from conftest import cli, wait_until

MULTI = {
    "type": "multi",
    "schedules": [
        {"type": "cron", "expression": "0 9 * * 1-5", "timezone": "UTC"},
        {"type": "cron", "expression": "0 11 * * 6,0", "timezone": "Europe/Berlin"},
    ],
}


async def test_a_multi_schedule_through_the_api_and_the_cli(node, http) -> None:
    made = await http.post("/api/v1/jobs", json={"name": "m", "command": "true", "schedule": MULTI})
    assert made.status_code == 201, made.text
    job = (await http.get(f"/api/v1/jobs/{made.json()['job_id']}")).json()
    assert job["schedule"] == MULTI and job["next_run_at"] is not None
    preview = await http.post(
        "/api/v1/schedules/preview",
        json={"schedule": MULTI, "after": "2026-12-24T12:00:00Z", "count": 3},
    )
    assert [f["at"] for f in preview.json()["fire_times"]] == [
        "2026-12-25T09:00:00Z",
        "2026-12-26T10:00:00Z",
        "2026-12-27T10:00:00Z",
    ]
    bad = {**MULTI, "schedules": [*MULTI["schedules"], {"type": "cron", "expression": "x"}]}
    refused = await http.post(
        "/api/v1/jobs", json={"name": "b", "command": "true", "schedule": bad}
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["details"]["field"] == "$.schedule.schedules[2].expression"

    api = ("--api", str(http.base_url))
    out = await cli(
        http, "jobs", "create", "twice", "--cron", "0 9 * * *", "--cron", "30 17 * * *",
        "--tz", "Europe/Berlin", "--command", "true", *api, "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_id = json.loads(out.stdout)["job_id"]
    shown = await cli(http, "jobs", "get", job_id, *api)
    assert "any of: cron 0 9 * * * Europe/Berlin" in shown.stdout
    assert "; cron 30 17 * * * Europe/Berlin" in shown.stdout


@pytest.mark.slow  # waits for two minute boundaries
async def test_two_specs_on_one_instant_fire_once(node, worker, http) -> None:
    both = {
        "type": "multi",
        "schedules": [
            {"type": "cron", "expression": "* * * * *"},
            {"type": "cron", "expression": "*/2 * * * *"},
        ],
    }
    made = await http.post("/api/v1/jobs", json={"name": "b", "command": "true", "schedule": both})
    job_id = made.json()["job_id"]

    async def twice() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return len([r for r in runs if r["state"] == "succeeded"]) >= 2

    await wait_until(twice, timeout=150)
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
    ticks = [r["scheduled_for"] for r in runs]
    assert len(ticks) == len(set(ticks)), ticks  # one run per instant
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit
