"""A job's upcoming fires (``GET /jobs/{id}/upcoming``, ``jobs next``, the console's job
page) are the fires the scheduler then makes: judged against the runs it really fires,
not against the preview code's own reading of the schedule. And the job's limits hold:
its pause, its window, the fires it has left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conftest import cli, wait_until


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def test_an_interval_jobs_next_fires_are_the_ones_it_fires(node, worker, http) -> None:
    body = {"name": "ticker", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    job = (await http.get(f"/api/v1/jobs/{job_id}")).json()
    up = (await http.get(f"/api/v1/jobs/{job_id}/upcoming", params={"count": 4})).json()
    predicted = [_at(f["at"]) for f in up["fire_times"]]
    # the first is the job's own next fire (its phase), not "now + every" from the page load
    assert predicted[0] == _at(job["next_run_at"]) and len(predicted) == 4
    assert up["schedule_words"] == "every 1s" and up["stops"] is None

    async def fired() -> list[datetime] | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 50})).json()
        times = sorted(_at(r["scheduled_for"]) for r in runs["runs"])
        return times if len(times) >= 3 else None

    actual = await wait_until(fired, timeout=20)
    assert actual[:3] == predicted[:3]  # what the scheduler fired, to the millisecond


async def test_a_paused_job_has_none_until_resumed_and_one_paused_until_a_time_from_then(
    node, http
) -> None:
    body = {
        "name": "hourly",
        "command": "true",
        "schedule": {"type": "cron", "expression": "0 * * * *"},
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused", "pause_reason": "x"})
    up = (await http.get(f"/api/v1/jobs/{job_id}/upcoming")).json()
    assert up["fire_times"] == [] and up["stops"] == "paused" and up["status"] == "paused"
    out = await cli(http, "jobs", "next", job_id, "--api", str(http.base_url))
    assert out.returncode == 0 and "none: paused" in out.stdout, out

    until = (datetime.now(UTC) + timedelta(hours=5)).replace(microsecond=0)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "active"})
    await http.patch(
        f"/api/v1/jobs/{job_id}", json={"status": "paused", "paused_until": until.isoformat()}
    )
    up = (await http.get(f"/api/v1/jobs/{job_id}/upcoming", params={"count": 3})).json()
    first = _at(up["fire_times"][0]["at"])
    assert _at(up["resumes_at"]) == until
    assert until < first <= until + timedelta(hours=1) and first.minute == 0


async def test_the_fires_it_has_left_and_its_window_end_the_list(node, http) -> None:
    capped = {
        "name": "twice",
        "command": "true",
        "schedule": {"type": "cron", "expression": "*/5 * * * *"},
        "max_fires": 2,
    }
    job_id = (await http.post("/api/v1/jobs", json=capped)).json()["job_id"]
    up = (await http.get(f"/api/v1/jobs/{job_id}/upcoming", params={"count": 10})).json()
    assert len(up["fire_times"]) == 2 and up["stops"] == "max_fires"
    assert up["schedule_words"] == "Every 5 minutes"

    starts = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    windowed = {
        "name": "window",
        "command": "true",
        "schedule": {"type": "interval", "every_s": 3600},
        "starts_at": starts.isoformat(),
        "ends_at": (starts + timedelta(hours=2, minutes=30)).isoformat(),
    }
    job_id = (await http.post("/api/v1/jobs", json=windowed)).json()["job_id"]
    up = (await http.get(f"/api/v1/jobs/{job_id}/upcoming", params={"count": 10})).json()
    fires = [_at(f["at"]) for f in up["fire_times"]]
    assert fires == [starts + timedelta(hours=h) for h in range(3)]
    assert up["stops"] == "window_ended"

    out = await cli(http, "jobs", "next", "window", "-n", "2", "--api", str(http.base_url))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(str(starts.year)) >= 2 and "no more" not in out.stdout


async def test_upcoming_refuses_what_it_cannot_answer(node, http) -> None:
    assert (await http.get("/api/v1/jobs/job_nope/upcoming")).status_code == 404
    body = {"name": "j", "command": "true", "schedule": {"type": "interval", "every_s": 60}}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    for count in ("0", "1001", "ten"):
        bad = await http.get(f"/api/v1/jobs/{job_id}/upcoming", params={"count": count})
        assert bad.status_code == 422 and "error" in bad.json()
    deleted = await http.delete(f"/api/v1/jobs/{job_id}")
    assert deleted.status_code == 200
    up = (await http.get(f"/api/v1/jobs/{job_id}/upcoming")).json()
    assert up["fire_times"] == [] and up["stops"] == "deleted"
