"""Deadlines: a run not started (or not finished) by its job's start (finish) deadline,
counted from its tick's planned time, is flagged on the run, as an event notifications
turn into deadline_missed, and in a metric; a late start may skip the run instead, as a
recorded decision; and a job with a dead-man's switch says so when it has had no
successful run for that long, nothing run at all included. Real node, real worker."""

from __future__ import annotations

import pytest
import trio

from conftest import cli, wait_until
from shardsched.core.notify import Kind, noted
from shardsched.worker.worker import Worker


async def _job(http, **body) -> str:
    spec = {"name": "dl", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    reply = await http.post("/api/v1/jobs", json={**spec, **body})
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def test_skip_late_start_without_a_start_deadline_is_refused(http) -> None:
    spec = {"name": "s", "command": "true", "schedule": {"type": "interval", "every_s": 60}}
    reply = await http.post("/api/v1/jobs", json={**spec, "skip_late_start": True})
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["details"]["field"] == "$.skip_late_start"
    job_id = await _job(http, name="s2", start_deadline_s=5)  # a patch is checked whole
    reply = await http.patch(f"/api/v1/jobs/{job_id}", json={"skip_late_start": True})
    assert reply.status_code == 200, reply.text
    assert (await http.get(f"/api/v1/jobs/{job_id}")).json()["skip_late_start"] is True
    other = await _job(http, name="s3")
    reply = await http.patch(f"/api/v1/jobs/{other}", json={"skip_late_start": True})
    assert reply.status_code == 422, reply.text
    assert (await http.get(f"/api/v1/jobs/{other}")).json().get("skip_late_start") is not True


def _missed(node, kind: str) -> float:
    return node.metrics.deadlines_missed.labels(kind)._value.get()


async def _events(http, job_id: str) -> list[dict]:
    page = (await http.get("/api/v1/events", params={"job_id": job_id, "limit": 500})).json()
    return page["events"]


async def test_runs_not_started_by_their_deadline_are_flagged_or_skipped(
    node, http, redis, dep, nursery
) -> None:
    flagged = await _job(http, start_deadline_s=1)
    skipper = await _job(http, name="skipper", start_deadline_s=1, skip_late_start=True)
    before = _missed(node, "start")
    # no worker yet: nothing starts

    async def late() -> bool:
        return _missed(node, "start") >= before + 4

    await wait_until(late, timeout=20)
    await http.patch(f"/api/v1/jobs/{flagged}", json={"status": "paused"})
    await http.patch(f"/api/v1/jobs/{skipper}", json={"status": "paused"})
    runs = (await http.get(f"/api/v1/jobs/{skipper}/runs")).json()["runs"]
    skipped = [r for r in runs if r["state"] == "skipped"]
    assert skipped and all(r["reason"] == "start_deadline" for r in skipped), runs
    details = [e for e in await _events(http, flagged) if "deadline" in (e.get("detail") or "")]
    assert details, await _events(http, flagged)
    rid = details[0]["run_id"]
    assert await redis.execute("HGET", dep.keys_for(rid).run(rid), "dlm") == b"start"
    run = (await http.get(f"/api/v1/runs/{rid}")).json()  # the flag, on the run's view
    assert run["deadline_missed"] == "start", run
    shown = await cli(http, "runs", "get", rid, "--api", str(http.base_url))
    assert "deadline missed: start" in shown.stdout, shown.stdout
    # a worker now: the flagged runs run late; the skipped ones never run
    w = Worker(redis, dep, worker_id="late-worker", concurrency=8)
    await nursery.start(w.run)

    async def flagged_ran() -> bool:
        got = (await http.get(f"/api/v1/jobs/{flagged}/runs")).json()["runs"]
        return bool(got) and all(r["state"] == "succeeded" for r in got)

    await wait_until(flagged_ran, timeout=20)
    await trio.sleep(1)  # a quiet second with a worker up: a skipped run that ran would show
    again = (await http.get(f"/api/v1/jobs/{skipper}/runs")).json()["runs"]
    assert {r["run_id"] for r in again if r["state"] == "skipped"} >= {r["run_id"] for r in skipped}


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_a_run_past_its_finish_deadline_and_a_silent_job(node, worker, http) -> None:
    slow = await _job(http, name="slow", command="sleep 3", finish_deadline_s=1, overlap="forbid")
    silent = await _job(http, name="silent", command="exit 1", expect_success_within_s=2)
    fine = await _job(http, name="fine", expect_success_within_s=3)
    before_finish, before_success = _missed(node, "finish"), _missed(node, "success")

    async def both() -> bool:
        return _missed(node, "finish") > before_finish and _missed(node, "success") > before_success

    await wait_until(both, timeout=20)
    finish = [e for e in await _events(http, slow) if "finish deadline" in (e.get("detail") or "")]
    assert finish and finish[0]["new"] == "running", finish
    late = (await http.get(f"/api/v1/runs/{finish[0]['run_id']}")).json()
    assert late["deadline_missed"] == "finish", late
    quiet = [e for e in await _events(http, silent) if (e.get("detail") or "").startswith("no")]
    assert quiet and quiet[0]["run_id"] == silent, quiet
    await trio.sleep(3.5)  # the silent one is said again; the one that succeeds never
    assert _missed(node, "success") >= before_success + 2
    assert not [e for e in await _events(http, fine) if "no success" in (e.get("detail") or "")]
    job = (await http.get(f"/api/v1/jobs/{silent}")).json()
    assert job["expect_success_within_s"] == 2


def test_deadline_events_are_deadline_missed_notifications() -> None:
    found, _ = noted(
        [
            ("j1:1000:1", "scheduled>scheduled||deadline: not started by its start deadline"),
            ("j1:2000:1", "scheduled>skipped||deadline: not started by its start deadline"),
            ("j2:1000:1", "running>running|w1|deadline: not finished by its finish deadline"),
            ("j3", "active>active||no success: no successful run within 2.0 s"),
        ]
    )
    assert [(n.kind, n.job_id) for n in found] == [
        (Kind.DEADLINE_MISSED, "j1"),
        (Kind.DEADLINE_MISSED, "j1"),
        (Kind.DEADLINE_MISSED, "j2"),
        (Kind.DEADLINE_MISSED, "j3"),
    ]
