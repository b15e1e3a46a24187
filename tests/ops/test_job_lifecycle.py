"""Versions, pause with a reason and an auto-resume time, auto-pause after consecutive
failures (issue #7)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from conftest import keyspace, wait_until
from shardsched.core.instants import from_ms

ONCE_PAST = {"type": "once", "at": "2020-01-01T00:00:00Z"}


def ms(text: str | None) -> float:
    assert text is not None
    return datetime.fromisoformat(text).timestamp() * 1000


async def create(http, **body) -> str:
    reply = await http.post("/api/v1/jobs", json={"name": "j", "command": "true", **body})
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def test_versions_history_and_the_version_each_run_ran_with(node, worker, http) -> None:
    job_id = await create(http, schedule={"type": "interval", "every_s": 3600})
    assert (await http.patch(f"/api/v1/jobs/{job_id}", json={"command": "echo v2"})).json()[
        "version"
    ] == 2
    run_id = (await http.post(f"/api/v1/jobs/{job_id}/trigger")).json()["run_id"]

    async def done() -> dict | None:
        run = (await http.get(f"/api/v1/runs/{run_id}")).json()
        return run if run["state"] == "succeeded" else None

    assert (await wait_until(done))["job_version"] == 2
    await http.patch(
        f"/api/v1/jobs/{job_id}", json={"schedule": {"type": "interval", "every_s": 60}}
    )
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused", "pause_reason": "db move"})
    await http.delete(f"/api/v1/jobs/{job_id}")
    history = (await http.get(f"/api/v1/jobs/{job_id}/versions")).json()
    versions = history["versions"]
    assert [v["version"] for v in versions] == [1, 2, 3, 4, 5]
    assert [v["status"] for v in versions] == ["active", "active", "active", "paused", "deleted"]
    assert [v["spec"]["command"] for v in versions] == ["true"] + ["echo v2"] * 4
    assert versions[1]["spec"]["schedule"]["every_s"] == 3600
    assert versions[2]["spec"]["schedule"]["every_s"] == 60
    for older, newer in itertools.pairwise(versions):
        assert older["valid_until"] == newer["valid_from"]
        assert ms(older["valid_from"]) <= ms(newer["valid_from"])
    assert versions[-1]["valid_until"] is None
    assert (await http.get("/api/v1/jobs/job_nope/versions")).status_code == 404


async def test_pause_with_reason_and_until_resumes_by_itself(node, http, redis, namespace) -> None:
    job_id = await create(http, schedule={"type": "interval", "every_s": 3600})
    before = await keyspace(redis, namespace)
    for bad, field in [
        ({"pause_reason": "x"}, "$.pause_reason"),
        ({"status": "active", "paused_until": "2030-01-01T00:00:00Z"}, "$.paused_until"),
        ({"status": "paused", "paused_until": "tomorrow"}, "$.paused_until"),
        ({"status": "paused", "pause_reason": "x" * 501}, "$.pause_reason"),
    ]:
        reply = await http.patch(f"/api/v1/jobs/{job_id}", json=bad)
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["details"]["field"] == field
    assert await keyspace(redis, namespace) == before

    now = from_ms(await redis.time_ms())
    until = (now + timedelta(seconds=1.5)).isoformat()
    paused = await http.patch(
        f"/api/v1/jobs/{job_id}",
        json={"status": "paused", "pause_reason": "maintenance window", "paused_until": until},
    )
    body = paused.json()
    assert body["status"] == "paused" and body["pause_reason"] == "maintenance window"
    assert ms(body["paused_until"]) == ms(until) and body["next_run_at"] is None
    assert ms(body["paused_at"]) >= ms(now.isoformat())
    # a later change of the paused job keeps its reason and time
    kept = (await http.patch(f"/api/v1/jobs/{job_id}", json={"command": "echo"})).json()
    assert (
        kept["pause_reason"] == "maintenance window"
        and kept["paused_until"] == body["paused_until"]
    )

    async def resumed() -> dict | None:
        job = (await http.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["status"] == "active" else None

    job = await wait_until(resumed, timeout=10)
    assert job["pause_reason"] is None and job["paused_until"] is None
    assert ms(job["updated_at"]) >= ms(until)
    assert ms(job["next_run_at"]) > ms(until), "next fire recomputed from the resume"
    assert node.auto_resumed == 1


async def test_auto_pause_after_consecutive_failures(node, worker, http, tmp_path) -> None:
    count = tmp_path / "count"
    # runs 1, 2 fail; run 3 succeeds (ends the streak); runs 4, 5, 6 fail: paused after 6.
    # One run at a time (overlap forbid): two at once on a loaded box would read the same
    # count, and the run that succeeds would not be the third by tick.
    command = f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; [ $n -eq 2 ]"
    job_id = await create(
        http,
        schedule={"type": "interval", "every_s": 0.3},
        overlap="forbid",
        command=command,
        auto_pause_after=3,
        retry_policy={"max_attempts": 1},
    )
    assert (await http.get(f"/api/v1/jobs/{job_id}")).json()["auto_pause_after"] == 3

    async def paused() -> dict | None:
        job = (await http.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["status"] == "paused" else None

    job = await wait_until(paused, timeout=15)
    assert job["pause_reason"] == "auto-paused after 3 consecutive failures"
    assert job["next_run_at"] is None
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 100})).json()["runs"]
    finished = sorted((r for r in runs if r["finished_at"]), key=lambda r: r["scheduled_for"])
    assert [r["state"] for r in finished][:6] == ["failed", "failed", "succeeded"] + ["failed"] * 3
    started = [r for r in runs if r["started_at"]]
    assert int(count.read_text()) in (len(started), len(started) - 1)  # one may be starting
    # nothing fired after the pause took effect (a tick fired just before it may still run)
    assert all(ms(r["created_at"]) <= ms(job["paused_at"]) for r in runs)
    assert len(finished) in (6, 7)
    resumed = (await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "active"})).json()
    assert resumed["status"] == "active" and resumed["pause_reason"] is None


async def test_backfill_runs_each_missing_tick_once_paced(node, worker, http, redis, dep) -> None:
    now = await redis.time_ms()
    start = from_ms(now - 8000)
    # ticks every second on the phase of 8 s ago: a past start_at sets the phase, not a
    # backlog, so the past ticks are not owed; a backfill runs them on request
    job_id = await create(
        http,
        schedule={"type": "interval", "every_s": 1, "start_at": start.isoformat()},
        command="sleep 0.2",
        catchup="none",
        misfire_grace_s=0,
    )

    window = {
        "since": (start - timedelta(seconds=3)).isoformat(),  # 3 ticks before it existed
        "until": from_ms(now - 1500).isoformat(),
        "max_concurrent": 2,
    }
    reply = await http.post(f"/api/v1/jobs/{job_id}/backfill", json=window)
    assert reply.status_code == 202, reply.text
    assert "deprecation" not in reply.headers
    result = reply.json()
    assert result["ticks"] == 10 and result["queued"] == 10 and result["already"] == 0
    assert result["started"] == 2

    async def all_done() -> list | None:
        params = {"limit": 100, "until": window["until"]}  # the window's, not later ticks'
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params=params)).json()
        done = [r for r in runs["runs"] if r["state"] == "succeeded"]
        return done if len(done) == 10 else None

    runs = await wait_until(all_done, timeout=20)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    first = int(start.timestamp() * 1000) - 3000
    assert sorted(r["run_id"] for r in runs) == sorted(
        f"{job_id}:{first + 1000 * i}:1" for i in range(10)
    )
    spans = sorted((ms(r["started_at"]), ms(r["finished_at"])) for r in runs)
    for at, _ in spans:  # never more than max_concurrent at once
        assert sum(1 for b, f in spans if b <= at < f) <= 2
    # the window's old names still work, for one version, and say they are deprecated
    old = {"start": window["since"], "end": window["until"], "max_concurrent": 2}
    again_reply = await http.post(f"/api/v1/jobs/{job_id}/backfill", json=old)
    assert again_reply.headers["deprecation"] == "true"
    again = again_reply.json()
    assert again == {**result, "queued": 0, "already": 10, "started": 0}
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    assert {t["outcome"] for t in ticks} <= {"fired", "skipped"}
    report = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()
    assert not [t for t in report["ticks"] if t["outcome"] in ("missing", "duplicated")]

    for bad, field in [
        ({**window, "until": window["since"], "since": window["until"]}, "$.until"),
        ({**window, "max_concurrent": 0}, "$.max_concurrent"),
        ({**window, "since": "2026-01-01T00:00:00"}, "$.since"),
        ({"since": "2000-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "$.until"),
        ({**window, "start": window["since"]}, "$.start"),  # both names: which one?
        ({"until": window["until"]}, "$.since"),
    ]:
        reply = await http.post(f"/api/v1/jobs/{job_id}/backfill", json=bad)
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["details"]["field"] == field
