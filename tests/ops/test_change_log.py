"""Who did what: every change through the API records the token's name and the time, in
the job's versions and in its append-only change log (API, SDK and CLI)."""

from __future__ import annotations

import re
import subprocess
from datetime import datetime

import httpx
import trio

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.core.patches import JobPatch
from shardsched.ops.access import tokens
from shardsched.ops.history import changes
from shardsched.sdk import AsyncClient
from shardsched.store.drive import drive_async

EVERY_HOUR = {"type": "interval", "every_s": 3600}


async def token(redis, dep, name: str, scope: Scope) -> str:
    request = TokenRequest(name=name, scopes=[scope])
    return str((await drive_async(tokens.create_token(dep, request, "test"), redis)).token)


def as_(http: httpx.AsyncClient, secret: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=http.base_url, headers={"authorization": f"Bearer {secret}"}, timeout=10
    )


async def test_every_change_records_who_and_when(node, worker, http, redis, dep) -> None:
    alice = as_(http, await token(redis, dep, "alice", Scope.WRITE))
    bob = as_(http, await token(redis, dep, "bob", Scope.ADMIN))
    async with alice, bob:
        body = {"name": "j", "command": "true", "schedule": EVERY_HOUR}
        job_id = (await alice.post("/api/v1/jobs", json=body)).json()["job_id"]
        path = f"/api/v1/jobs/{job_id}"
        assert (await bob.patch(path, json={"command": "echo 2"})).status_code == 200
        paused = await alice.patch(path, json={"status": "paused", "pause_reason": "db moves"})
        assert paused.status_code == 200
        assert (await bob.patch(path, json={"status": "active"})).status_code == 200
        run_id = (await alice.post(path + "/trigger")).json()["run_id"]
        window = {"since": "2026-01-01T00:00:00Z", "until": "2026-01-01T02:00:00Z"}
        assert (await bob.post(path + "/backfill", json=window)).status_code == 202
        assert (await alice.delete(path)).status_code == 200
        # refused: no entry and no run (its backfill runs may still be finishing, which
        # changes the job's own counters meanwhile: look at what a trigger writes)
        sk = dep.keys_for(job_id)
        probe = [("XLEN", sk.changes(job_id)), ("HGET", sk.job(job_id), "triggers")]
        before = await redis.pipeline(probe)
        assert (await alice.post(path + "/trigger")).status_code == 409
        assert await redis.pipeline(probe) == before

        log = (await bob.get(path + "/changes")).json()
        got = [(c["action"], c["by"], c["version"], c["detail"]) for c in log["changes"]]
        assert got == [
            ("delete", "alice", 5, None),
            ("backfill", "bob", None, got[1][3]),
            ("trigger", "alice", None, run_id),
            ("resume", "bob", 4, None),
            ("pause", "alice", 3, "db moves"),
            ("update", "bob", 2, None),
            ("create", "alice", 1, None),
        ]
        assert re.fullmatch(
            r"2026-01-01T00:00:00\+00:00\.\.\S+: \d+ ticks queued, 0 had runs", got[1][3]
        )
        # instants, not their text: "…:10Z" sorts after "…:10.018000Z" as a string
        ats = [datetime.fromisoformat(c["at"]) for c in log["changes"]]
        assert ats == sorted(ats, reverse=True) and log["next_cursor"] is None

        versions = (await bob.get(path + "/versions")).json()["versions"]
        assert [(v["version"], v["changed_by"]) for v in versions] == [
            (1, "alice"),
            (2, "bob"),
            (3, "alice"),
            (4, "bob"),
            (5, "alice"),
        ]

        pages, cursor = [], None  # the same log, two at a time
        while True:
            query = {"limit": 2} | ({"cursor": cursor} if cursor else {})
            page = (await bob.get(path + "/changes", params=query)).json()
            pages += [c["action"] for c in page["changes"]]
            if not (cursor := page["next_cursor"]):
                break
        assert pages == [g[0] for g in got]
        # a cursor Redis would refuse (nothing before 0-0, halves past 2**64 - 1) is the
        # caller's error, as on every other list (an independent tester's 500s)
        for cursor in ("nope", "0-0", "00-0", "18446744073709551616-0", "0-18446744073709551616"):
            bad = await bob.get(path + "/changes", params={"cursor": cursor})
            assert bad.status_code == 422 and bad.json()["error"], (cursor, bad.text)
        first = (await bob.get(path + "/changes", params={"limit": 2})).json()
        padded = await bob.get(path + "/changes", params={"cursor": "0" + first["next_cursor"]})
        assert padded.status_code == 200, padded.text  # leading zeros: the same entry id
        again = await bob.get(path + "/changes", params={"cursor": first["next_cursor"]})
        assert padded.json() == again.json()
        assert (await bob.get("/api/v1/jobs/job_000000000000/changes")).status_code == 404

        out = await trio.to_thread.run_sync(
            lambda: subprocess.run(
                shardsched_cmd("jobs", "changes", job_id, "--api", str(http.base_url)),
                capture_output=True,
                text=True,
                env={**child_env(), "SHARDSCHED_TOKEN": bob.headers["authorization"][7:]},
                timeout=60,
            )
        )
        assert out.returncode == 0, out.stderr
        assert "delete" in out.stdout and "alice" in out.stdout and "db moves" in out.stdout


async def test_dag_changes_and_retries_are_logged(node, worker, http, redis, dep) -> None:
    carol = as_(http, await token(redis, dep, "carol", Scope.WRITE))
    async with carol:
        dag = {"name": "d", "schedule": EVERY_HOUR, "tasks": [{"name": "t", "command": "true"}]}
        dag_id = (await carol.post("/api/v1/dags", json=dag)).json()["dag_id"]
        path = f"/api/v1/dags/{dag_id}"
        dag_run = (await carol.post(path + "/trigger")).json()["dag_run_id"]
        await carol.patch(path, json={"status": "paused"})
        await carol.patch(path, json={"status": "active"})
        await carol.delete(path)
        log = (await carol.get(path + "/changes")).json()["changes"]
        assert [(c["action"], c["by"], c["detail"]) for c in log] == [
            ("delete", "carol", None),
            ("resume", "carol", None),
            ("pause", "carol", None),
            ("trigger", "carol", dag_run),
            ("create", "carol", None),
        ]

        once = {"type": "once", "at": "2020-01-01T00:00:00Z"}
        retry = {"max_attempts": 2, "base_s": 0, "jitter": False}
        body = {"name": "f", "command": "false", "schedule": once, "retry_policy": retry}
        job_id = (await carol.post("/api/v1/jobs", json=body)).json()["job_id"]

        async def dead() -> list:
            return (await carol.get("/api/v1/dead-letter")).json()["runs"]

        (run,) = await wait_until(dead, timeout=15)
        again = await carol.post(f"/api/v1/runs/{run['run_id']}/retry")
        assert again.status_code == 201
        log = (await carol.get(f"/api/v1/jobs/{job_id}/changes")).json()["changes"]
        assert log[0]["action"] == "retry" and log[0]["by"] == "carol"
        assert log[0]["detail"] == f"{run['run_id']} -> {again.json()['run_id']}"


async def test_the_sdk_records_its_actor_and_the_scheduler_its_own(
    node, redis_server, redis, dep
) -> None:
    client = await AsyncClient.open(redis_server.url, dep.namespace, actor="ci-bot")
    try:
        from shardsched import IntervalSchedule, JobPatch, JobSpec
        from shardsched.core.models import JobStatus

        spec = JobSpec(name="s", schedule=IntervalSchedule(every_s=3600), command="true")
        job_id = (await client.add_job(spec)).job_id
        soon = (await redis.time_ms()) + 300
        from shardsched.core.instants import from_ms

        patch = JobPatch(status=JobStatus.PAUSED, paused_until=from_ms(soon))
        await client.update_job(job_id, patch)

        async def resumed() -> bool:
            return (await client.get_job(job_id)).status == JobStatus.ACTIVE

        await wait_until(resumed, timeout=10)
        versions = (await client.job_versions(job_id)).versions
        assert [v.changed_by for v in versions] == ["ci-bot", "ci-bot", "scheduler"]
        log = (await client.job_changes(job_id)).changes
        assert [(c.action, c.by) for c in log] == [
            ("resume", "scheduler"),
            ("pause", "ci-bot"),
            ("create", "ci-bot"),
        ]
    finally:
        await client.aclose()


async def test_version_history_is_bounded_and_the_change_log_is_whole(redis, dep) -> None:
    spec = JobSpec(name="busy", schedule=IntervalSchedule(every_s=3600), command="echo 0")
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    for n in range(1, 106):
        patch = JobPatch(command=f"echo {n}")
        await drive_async(ops.patch_job(dep, job_id, patch, "patcher"), redis)
    versions = (await drive_async(ops.job_versions(dep, job_id), redis)).versions
    assert [v.version for v in versions] == list(range(6, 107))  # 100 earlier + the current
    assert versions[-1].spec.command == "echo 105" and versions[0].spec.command == "echo 5"
    log = await drive_async(changes.job_changes(dep, job_id, limit=1000), redis)
    assert len(log.changes) == 106 and log.changes[-1].action == "create"


async def test_triggers_cannot_push_a_change_out_of_the_change_log(http, redis, dep) -> None:
    """Runs by hand go to a stream of their own (acts:<id>), capped apart: a job's
    triggers, however many, leave its changes where they were; the log shows both, newest
    first, one page after another."""
    body = {"name": "j", "command": "true", "schedule": EVERY_HOUR}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    path = f"/api/v1/jobs/{job_id}"
    assert (await http.patch(path, json={"command": "echo 2"})).status_code == 200
    sk = dep.keys_for(job_id)
    before = await redis.execute("XRANGE", sk.changes(job_id), "-", "+")
    for _ in range(30):
        assert (await http.post(f"{path}/trigger")).status_code == 201
    assert await redis.execute("XRANGE", sk.changes(job_id), "-", "+") == before
    assert await redis.execute("XLEN", sk.acts(job_id)) == 30
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 7, **({"cursor": cursor} if cursor else {})}
        page = (await http.get(f"{path}/changes", params=params)).json()
        seen += [c["action"] for c in page["changes"]]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    assert seen == ["trigger"] * 30 + ["update", "create"], seen
