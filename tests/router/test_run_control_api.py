"""Run control over HTTP and the CLI: ``POST /runs/{id}/cancel`` and
``/dag-runs/{id}/cancel`` (who and why recorded, 409 once ended, 404 unknown, 422 a bad
body that writes nothing, 403 for a read-only token), and ``GET /api/v1/runs?state=…``
for runs under way across jobs, with its filters."""

from __future__ import annotations

import httpx
import pytest

from conftest import cli, keyspace, wait_until
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops import listing
from shardsched.ops.access import tokens
from shardsched.ops.jobs import define
from shardsched.store.drive import drive_async


async def _queued(redis, dep, name: str) -> str:
    spec = JobSpec(name=name, schedule=OnceSchedule(at=from_ms(0)), command="true")
    job_id = (await drive_async(define.create_jobs(dep, [spec]), redis))[0].job_id

    async def scheduled():
        page = await drive_async(listing.runs_page(dep, job_id), redis)
        return page.runs[0].run_id if page.runs else None

    return await wait_until(scheduled, timeout=20)


async def test_cancel_a_run_over_http_and_the_cli(http, redis, dep, node) -> None:
    rid = await _queued(redis, dep, "to-cancel")
    listed = (await http.get("/api/v1/runs", params={"state": "queued"})).json()
    assert rid in [r["run_id"] for r in listed["runs"]]
    listed = (await http.get("/api/v1/runs", params={"state": "queued", "job": "x"})).json()
    assert listed["runs"] == []

    resp = await http.post(f"/api/v1/runs/{rid}/cancel", json={"reason": "not today"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["state"] == "cancelled" and body["cancelled_by"] == "test-admin"
    assert body["reason"] == "cancelled by test-admin: not today"
    resp = await http.post(f"/api/v1/runs/{rid}/cancel")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "conflict"
    resp = await http.post("/api/v1/runs/nope:1:1/cancel")
    assert resp.status_code == 404

    other = await _queued(redis, dep, "by-cli")
    out = await cli(http, "runs", "list", "--state", "queued", "--api", str(http.base_url))
    assert out.returncode == 0, out.stderr
    assert other in out.stdout
    out = await cli(http, "runs", "cancel", other, "--reason", "typo", "--api", str(http.base_url))
    assert out.returncode == 0, out.stderr
    assert "cancelled" in out.stdout
    out = await cli(http, "runs", "list", "--state", "failed", "--api", str(http.base_url))
    assert out.returncode == 1 and "runs under way" in out.stderr
    # an empty id would name the list of runs: refused, not a traceback (found using dev)
    for verb in ("get", "cancel", "output"):
        out = await cli(http, "runs", verb, "", "--api", str(http.base_url))
        assert out.returncode == 1 and out.stderr.strip() == "shardsched: the id is empty"


@pytest.mark.parametrize(
    ("body", "field"),
    [({"reason": 3}, "$.reason"), ({"reason": "x" * 501}, "$.reason"), ({"why": "x"}, "$.why")],
)
async def test_a_bad_cancel_body_is_422_and_writes_nothing(http, redis, dep, node, body, field):
    rid = await _queued(redis, dep, "keep")
    before = await keyspace(redis, dep.namespace)
    resp = await http.post(f"/api/v1/runs/{rid}/cancel", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["details"]["field"] == field
    after = await keyspace(redis, dep.namespace)
    assert {k: v for k, v in after.items() if b"events" not in k} == {
        k: v for k, v in before.items() if b"events" not in k
    }


@pytest.mark.parametrize(
    "params",
    [
        {"state": "stuck"},
        {"state": "failed", "worker": "w1"},
        {"state": "running", "label": "x"},
        {"state": "running", "cursor": "%%%"},
    ],
)
async def test_bad_list_queries_are_422(http, params) -> None:
    resp = await http.get("/api/v1/runs", params=params)
    assert resp.status_code == 422, resp.text


async def test_a_read_only_token_cannot_cancel(http, redis, dep, node) -> None:
    rid = await _queued(redis, dep, "ro")
    made = await drive_async(
        tokens.create_token(dep, TokenRequest(name="viewer", scopes=[Scope.READ]), "t"), redis
    )
    headers = {"authorization": f"Bearer {made.token}"}
    async with httpx.AsyncClient(base_url=http.base_url, headers=headers) as ro:
        assert (await ro.get("/api/v1/runs", params={"state": "queued"})).status_code == 200
        resp = await ro.post(f"/api/v1/runs/{rid}/cancel")
        assert resp.status_code == 403
    assert (await http.get(f"/api/v1/runs/{rid}")).json()["state"] == "scheduled"


async def _dead(http, redis, dep, job_id: str) -> str:
    async def dead():
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return next((r["run_id"] for r in runs if r["state"] == "dead_letter"), None)

    return await wait_until(dead, timeout=30)


async def test_the_failure_inbox_names_things_and_retries_in_bulk(
    nursery, http, redis, dep, node
) -> None:
    from shardsched.worker.worker import Worker

    await nursery.start(Worker(redis, dep, worker_id="w-inbox", concurrency=4).run)
    fails = {"max_attempts": 2, "base_s": 0, "jitter": False}
    ids = {}
    for name in ("boom-a", "boom-b", "other-c"):
        body = {
            "name": name, "command": "echo it broke; exit 3",
            "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"}, "retry_policy": fails,
        }  # fmt: skip
        ids[name] = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    dag = {
        "name": "boom-dag", "schedule": {"type": "interval", "every_s": 86400},
        "tasks": [{"name": "t", "command": "exit 4", "retry_policy": fails}],
    }  # fmt: skip
    dag_id = (await http.post("/api/v1/dags", json=dag)).json()["dag_id"]
    await http.post(f"/api/v1/dags/{dag_id}/trigger")
    dead = {name: await _dead(http, redis, dep, job_id) for name, job_id in ids.items()}
    dead_task = await _dead(http, redis, dep, f"{dag_id}.t")

    inbox = (await http.get("/api/v1/runs", params={"state": "dead_letter"})).json()["runs"]
    by_id = {r["run_id"]: r for r in inbox}
    assert by_id[dead["boom-a"]]["job_name"] == "boom-a"
    assert by_id[dead["boom-a"]]["output_tail"].strip() == "it broke"
    assert by_id[dead_task]["job_name"] == "boom-dag"

    before = await keyspace(redis, dep.namespace)
    dry = await http.post(
        "/api/v1/dead-letter/retry", json={"name_prefix": "boom-", "dry_run": True}
    )
    assert dry.status_code == 200, dry.text
    out = dry.json()
    # a DAG task's dead letter is retried too: it resumes its DAG run (issue #50)
    assert sorted(out["would_retry"]) == sorted([dead["boom-a"], dead["boom-b"], dead_task])
    assert out["refused"] == []
    assert await keyspace(redis, dep.namespace) == before  # a dry run writes nothing

    cli_dry = await cli(http, "runs", "retry", "--name-prefix", "boom-", "--dry-run",
                        "--api", str(http.base_url))  # fmt: skip
    assert cli_dry.returncode == 0 and "would retry 3, refused 0" in cli_dry.stdout

    done = await http.post(
        "/api/v1/dead-letter/retry", json={"run_ids": [dead["boom-a"], dead["boom-a"], dead_task]}
    )
    assert done.status_code == 201, done.text
    out = done.json()
    assert [r["run_id"] for r in out["retried"]] == [
        dead["boom-a"].rsplit(":", 1)[0] + ":3", dead_task.rsplit(":", 1)[0] + ":3"
    ]  # fmt: skip
    assert out["refused"] == []
    again = (
        await http.post("/api/v1/dead-letter/retry", json={"run_ids": [dead["boom-a"]]})
    ).json()
    assert "already retried" in again["refused"][0]["reason"]  # a double click runs it once
    assert (
        await http.post("/api/v1/dead-letter/retry", json={"run_ids": ["x"] * 0, "bogus": 1})
    ).status_code == 422


async def test_jobs_filtered_by_health_late_and_failing(nursery, http, redis, dep) -> None:
    # no node: nothing fires, so a job whose tick has passed stays late
    def once(name: str, at: str, command: str = "true") -> dict:
        return {"name": name, "command": command, "schedule": {"type": "once", "at": at}}

    late = (await http.post("/api/v1/jobs", json=once("late-one", "2020-01-01T00:00:00Z"))).json()
    await http.post("/api/v1/jobs", json=once("on-time", "2099-01-01T00:00:00Z"))
    # a past tick fires at once from registration: make it two minutes overdue
    timer = dep.keys_for(late["job_id"]).timer
    await redis.execute("ZADD", timer, "XX", await redis.time_ms() - 120_000, late["job_id"])
    listed = (await http.get("/api/v1/jobs", params={"health": "late"})).json()["jobs"]
    assert [j["job_id"] for j in listed] == [late["job_id"]]
    assert (await http.get("/api/v1/jobs", params={"health": "sick"})).status_code == 422

    from shardsched.shard.manager import ShardManager
    from shardsched.worker.worker import Worker

    await nursery.start(ShardManager(redis, dep, node_id="n-health", renew_every_s=0.5).run)
    await nursery.start(Worker(redis, dep, worker_id="w-health", concurrency=4).run)
    bad = (
        await http.post("/api/v1/jobs", json=once("bad", "2020-01-01T00:00:00Z", "exit 1"))
    ).json()

    async def failing():
        page = (await http.get("/api/v1/jobs", params={"health": "failing"})).json()["jobs"]
        return page if page else None

    listed = await wait_until(failing, timeout=30)
    assert [j["job_id"] for j in listed] == [bad["job_id"]]
    await wait_until(
        lambda: _none_late(http), timeout=30
    )  # the owner fired the late ones: none is late now


async def _none_late(http) -> bool:
    return (await http.get("/api/v1/jobs", params={"health": "late"})).json()["jobs"] == []
