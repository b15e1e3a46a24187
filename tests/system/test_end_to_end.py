"""A job registered over HTTP or the SDK fires on time and runs on a worker (real Redis)."""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import trio

from conftest import wait_until
from nodes import fired_at_least
from shardsched import Client, IntervalSchedule, JobSpec
from shardsched.core.instants import from_ms
from shardsched.core.views import Run


def iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


async def server_now(redis) -> datetime:
    return from_ms(await redis.time_ms())


async def terminal_run(http: httpx.AsyncClient, job_id: str, timeout: float = 10.0) -> dict:
    async def done() -> dict | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        if runs and runs[0]["state"] in ("succeeded", "failed"):
            return runs[0]
        return None

    return await wait_until(done, timeout)


async def test_once_job_fires_on_time_and_output_is_readable(node, worker, http, redis) -> None:
    at = await server_now(redis) + timedelta(seconds=1)
    body = {
        "name": "hello",
        "schedule": {"type": "once", "at": iso(at)},
        "command": 'echo "hello from $SHARDSCHED_JOB_ID attempt $SHARDSCHED_ATTEMPT"',
        "timeout_s": 10,
    }
    resp = await http.post("/api/v1/jobs", json=body)
    assert resp.status_code == 201, resp.text
    created = resp.json()
    job_id = created["job_id"]
    assert datetime.fromisoformat(created["next_run_at"]) == at.replace(
        microsecond=at.microsecond // 1000 * 1000
    )

    run = await terminal_run(http, job_id)
    assert run["state"] == "succeeded"
    assert run["exit_code"] == 0 and run["attempt"] == 1
    assert run["claimed_by"] == "test-worker"
    scheduled = datetime.fromisoformat(run["scheduled_for"])
    created_at = datetime.fromisoformat(run["created_at"])
    lag = (created_at - scheduled).total_seconds()
    assert 0 <= lag < 1.5, lag
    for field in ("started_at", "finished_at"):
        assert run[field] is not None
    assert run["lease_expires_at"] is None  # a finished run holds no lease

    one = (await http.get(f"/api/v1/runs/{run['run_id']}")).json()
    assert one == run
    out = (await http.get(f"/api/v1/runs/{run['run_id']}/output")).json()
    assert out["output"] == f"hello from {job_id} attempt 1\n"
    job = (await http.get(f"/api/v1/jobs/{job_id}")).json()
    assert job["next_run_at"] is None and job["status"] == "active"


async def test_interval_job_fires_once_per_tick(node, worker, http) -> None:
    body = {"name": "tick", "schedule": {"type": "interval", "every_s": 1}, "command": "true"}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def three_runs() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs?limit=100")).json()["runs"]
        return runs if len(runs) >= 3 else None

    runs = await wait_until(three_runs, timeout=15)
    ticks = [datetime.fromisoformat(r["scheduled_for"]) for r in runs]
    assert len(runs) >= 3
    assert len(set(ticks)) == len(ticks), "a tick fired twice"
    assert ticks == sorted(ticks, reverse=True), "runs are listed newest first"
    gaps = {round((a - b).total_seconds(), 3) for a, b in itertools.pairwise(ticks)}
    assert gaps == {1.0}, f"ticks not one second apart: {gaps}"
    assert len({r["run_id"] for r in runs}) == len(runs)


async def test_failing_command_ends_failed_with_exit_code(node, worker, http) -> None:
    body = {
        "name": "fail",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": "echo about to fail; exit 3",
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    run = await terminal_run(http, job_id)
    assert run["state"] == "failed"
    assert run["exit_code"] == 3
    out = (await http.get(f"/api/v1/runs/{run['run_id']}/output")).json()["output"]
    assert out == "about to fail\n"


async def test_timeout_kills_the_whole_process_group(node, worker, http, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = (
        f"sleep 30 & echo $! >> {pids}; (sleep 30; true) & echo $! >> {pids}; "
        "echo started; sleep 30"
    )
    body = {
        "name": "slow",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": command,
        "timeout_s": 1,
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    run = await terminal_run(http, job_id, timeout=15)
    assert run["state"] == "failed"
    assert run["reason"] == "timeout"
    assert run["exit_code"] is None
    assert (await http.get(f"/api/v1/runs/{run['run_id']}/output")).json()["output"] == "started\n"
    for pid in map(int, pids.read_text().split()):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # A zombie not yet reaped by init is dead too; anything else survived the kill.
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        assert state == "Z", f"process {pid} of the timed-out job survived"


async def test_manual_trigger_runs_now(node, worker, http) -> None:
    body = {
        "name": "manual",
        "schedule": {"type": "cron", "expression": "0 0 1 1 *"},
        "command": "echo manual",
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    r1 = await http.post(f"/api/v1/jobs/{job_id}/trigger")
    r2 = await http.post(f"/api/v1/jobs/{job_id}/trigger")
    assert r1.status_code == r2.status_code == 201
    ids = {r1.json()["run_id"], r2.json()["run_id"]}
    assert len(ids) == 2

    async def both_done() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return len(runs) == 2 and all(r["state"] == "succeeded" for r in runs)

    await wait_until(both_done)
    assert (await http.post("/api/v1/jobs/job_nope/trigger")).status_code == 404


async def test_sdk_registers_and_reads_through_the_same_scripts(
    node, worker, redis_server, dep
) -> None:
    client = await trio.to_thread.run_sync(Client, redis_server.url, dep.namespace)
    try:
        assert client.deployment == dep
        specs = [
            JobSpec(name=f"bulk-{i}", schedule=IntervalSchedule(every_s=3600), command="true")
            for i in range(50)
        ]
        created = await trio.to_thread.run_sync(client.add_jobs, specs)
        assert len({c.job_id for c in created}) == 50
        job = await trio.to_thread.run_sync(client.get_job, created[0].job_id)
        assert job.name == "bulk-0" and job.next_run_at == created[0].next_run_at
        triggered = await trio.to_thread.run_sync(client.trigger, created[0].job_id)

        async def succeeded() -> Run | None:
            run = await trio.to_thread.run_sync(client.get_run, triggered.run_id)
            return run if run.state == "succeeded" else None

        run = await wait_until(succeeded)
        assert run.job_id == created[0].job_id
        runs = await trio.to_thread.run_sync(client.list_runs, created[0].job_id)
        assert [r.run_id for r in runs.runs] == [triggered.run_id] and runs.next_cursor is None
    finally:
        client.close()


async def test_pause_resume_delete_keep_history(node, worker, http, redis, dep) -> None:
    body = {"name": "p", "schedule": {"type": "interval", "every_s": 0.5}, "command": "true"}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def some_runs() -> int:
        return len((await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"])

    await wait_until(some_runs)
    paused = (await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})).json()
    assert paused["status"] == "paused" and paused["next_run_at"] is None
    count = await some_runs()
    sk = dep.keys_for(job_id)
    assert await redis.execute("ZSCORE", sk.timer, job_id) is None, "nothing left to fire"
    # a witness on the same interval: while it fires three times, the paused job must not
    witness = (await http.post("/api/v1/jobs", json={**body, "name": "witness"})).json()
    await fired_at_least(redis, dep, [witness["job_id"]], 3)
    assert await some_runs() <= count + 1  # at most one fire already in flight
    frozen = await some_runs()

    resumed = (await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "active"})).json()
    assert resumed["status"] == "active" and resumed["next_run_at"] is not None
    await wait_until(lambda: _more(some_runs, frozen))

    changed = (
        await http.patch(
            f"/api/v1/jobs/{job_id}", json={"schedule": {"type": "interval", "every_s": 3600}}
        )
    ).json()
    assert changed["schedule"]["every_s"] == 3600 and changed["version"] > resumed["version"]

    deleted = await http.delete(f"/api/v1/jobs/{job_id}")
    assert deleted.status_code == 200 and deleted.json()["status"] == "deleted"
    assert (await http.get(f"/api/v1/jobs/{job_id}")).json()["status"] == "deleted"
    assert await some_runs() > 0, "history survives delete"
    assert (await http.post(f"/api/v1/jobs/{job_id}/trigger")).status_code == 409
    assert (await http.patch(f"/api/v1/jobs/{job_id}", json={"name": "x"})).status_code == 409


async def _more(count_fn, than: int) -> bool:
    return await count_fn() > than


async def test_healthz_and_readyz(node, http, dep) -> None:
    assert (await http.get("/healthz")).json() == {"status": "ok"}

    async def ready() -> dict | None:
        resp = await http.get("/readyz")
        return resp.json() if resp.status_code == 200 else None

    body = await wait_until(ready)
    assert body["owned"] == dep.n_shards
    assert body["owners"] == {str(s): "test-node" for s in range(dep.n_shards)}
    cluster = (await http.get("/api/v1/cluster")).json()
    assert [n["node_id"] for n in cluster["nodes"]] == ["test-node"]
    assert sorted(cluster["nodes"][0]["shards"]) in ([], list(range(dep.n_shards)))
    assert {s["owner"] for s in cluster["shards"]} == {"test-node"}
    assert all(s["epoch"] >= 1 and s["lease_expires_at"] for s in cluster["shards"])
    assert datetime.now(UTC)  # the clock module imports cleanly


async def test_handler_jobs_run_in_process(node, worker, http) -> None:
    ok = {
        "name": "h",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": "handler:noop",
    }
    missing = {**ok, "command": "handler:no-such-handler"}
    ok_id = (await http.post("/api/v1/jobs", json=ok)).json()["job_id"]
    missing_id = (await http.post("/api/v1/jobs", json=missing)).json()["job_id"]
    ok_run = await terminal_run(http, ok_id)
    assert ok_run["state"] == "succeeded" and ok_run["exit_code"] == 0
    bad_run = await terminal_run(http, missing_id)
    assert bad_run["state"] == "failed"
    assert "no handler named 'no-such-handler'" in bad_run["reason"]


async def test_handler_timeout_is_enforced(node, worker, http) -> None:
    from shardsched.worker.handlers import handler

    @handler("test-sleeps-forever")
    async def sleeps(ctx) -> None:
        await trio.sleep_forever()

    body = {
        "name": "slow-handler",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": "handler:test-sleeps-forever",
        "timeout_s": 0.5,
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    run = await terminal_run(http, job_id)
    assert run["state"] == "failed" and run["reason"] == "timeout"
    took = datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"])
    assert timedelta(seconds=0.5) <= took < timedelta(seconds=1.5)


async def test_timeout_sends_sigterm_first_and_keeps_the_output(node, worker, http) -> None:
    command = "trap 'echo got TERM; exit 0' TERM; echo started; sleep 30 & wait"
    body = {
        "name": "graceful-timeout",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": command,
        "timeout_s": 1,
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    run = await terminal_run(http, job_id, timeout=15)
    assert run["state"] == "failed" and run["reason"] == "timeout"
    out = (await http.get(f"/api/v1/runs/{run['run_id']}/output")).json()["output"]
    assert out == "started\ngot TERM\n"
