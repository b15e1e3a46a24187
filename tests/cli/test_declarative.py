"""Declarative jobs: ids users choose, PUT create-or-replace as a new version, an unchanged
definition a no-op, If-Match as optimistic concurrency (issue #17)."""

from __future__ import annotations

import msgspec
import pytest

from conftest import keyspace, wait_until
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.errors import PreconditionFailed, ValidationError
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops.access import tokens
from shardsched.ops.jobs import declare
from shardsched.ops.jobs.define import create_jobs
from shardsched.store.drive import drive_async

HOURLY = {"type": "interval", "every_s": 3600}
JOB = {"name": "report", "command": "echo v1", "schedule": HOURLY}


async def test_put_creates_replaces_and_leaves_an_unchanged_job_alone(node, http) -> None:
    created = await http.put("/api/v1/jobs/nightly-report", json=JOB)
    assert created.status_code == 201, created.text
    assert created.headers["shardsched-outcome"] == "created"
    assert created.headers["etag"] == '"1"'
    job = created.json()
    assert job["job_id"] == "nightly-report" and job["version"] == 1
    next_run = job["next_run_at"]

    again = await http.put("/api/v1/jobs/nightly-report", json=JOB)
    assert again.status_code == 200 and again.headers["shardsched-outcome"] == "unchanged"
    spelled = {**JOB, "timeout_s": 3600, "retry_policy": {"max_attempts": 1}, "env": {}}
    same = await http.put("/api/v1/jobs/nightly-report", json=spelled)  # defaults spelled out
    assert same.headers["shardsched-outcome"] == "unchanged" and same.json()["version"] == 1
    assert again.json()["version"] == 1 and again.json()["next_run_at"] == next_run

    changed = await http.put("/api/v1/jobs/nightly-report", json={**JOB, "command": "echo v2"})
    assert changed.status_code == 200 and changed.headers["shardsched-outcome"] == "updated"
    body = changed.json()
    assert body["version"] == 2 and body["command"] == "echo v2"
    assert body["next_run_at"] == next_run  # the same schedule keeps its next fire
    # a replace is the whole definition: what the body leaves out returns to its default
    with_env = await http.put("/api/v1/jobs/nightly-report", json={**JOB, "env": {"A": "1"}})
    assert with_env.json()["env"] == {"A": "1"} and with_env.json()["version"] == 3
    without = await http.put("/api/v1/jobs/nightly-report", json=JOB)
    assert without.json()["env"] == {} and without.json()["version"] == 4

    got = await http.get("/api/v1/jobs/nightly-report")
    assert got.headers["etag"] == '"4"'
    versions = (await http.get("/api/v1/jobs/nightly-report/versions")).json()["versions"]
    assert [v["spec"]["command"] for v in versions] == ["echo v1", "echo v2", "echo v1", "echo v1"]
    changes = (await http.get("/api/v1/jobs/nightly-report/changes")).json()["changes"]
    assert [c["action"] for c in changes] == ["update", "update", "update", "create"]


async def test_if_match_refuses_a_stale_version_and_changes_nothing(
    node, http, redis, namespace
) -> None:
    await http.put("/api/v1/jobs/guarded", json=JOB)
    ok = await http.put(
        "/api/v1/jobs/guarded", json={**JOB, "command": "echo 2"}, headers={"if-match": '"1"'}
    )
    assert ok.status_code == 200 and ok.json()["version"] == 2
    before = await keyspace(redis, namespace)
    stale = await http.put(
        "/api/v1/jobs/guarded", json={**JOB, "command": "echo 3"}, headers={"if-match": '"1"'}
    )
    assert stale.status_code == 412, stale.text
    error = stale.json()["error"]
    assert error["code"] == "precondition_failed"
    assert error["details"] == {
        "id": "guarded",
        "expected": 1,
        "current": 2,
        "type": "PreconditionFailed",
    }
    patch = await http.patch(
        "/api/v1/jobs/guarded", json={"command": "echo 4"}, headers={"if-match": "1"}
    )
    assert patch.status_code == 412
    absent = await http.put("/api/v1/jobs/nobody", json=JOB, headers={"if-match": '"1"'})
    assert absent.status_code == 412 and absent.json()["error"]["details"]["current"] is None
    bad = await http.put("/api/v1/jobs/guarded", json=JOB, headers={"if-match": "yesterday"})
    assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "If-Match"
    assert await keyspace(redis, namespace) == before
    weak = await http.patch(
        "/api/v1/jobs/guarded", json={"command": "echo 5"}, headers={"if-match": 'W/"2"'}
    )
    assert weak.status_code == 200 and weak.headers["etag"] == '"3"'


async def test_chosen_ids_are_validated_unique_and_never_overwritten_by_post(
    node, http, redis, namespace
) -> None:
    posted = await http.post("/api/v1/jobs", json={**JOB, "id": "etl-load"})
    assert posted.status_code == 201 and posted.json()["job_id"] == "etl-load"
    before = await keyspace(redis, namespace)
    twice = await http.post("/api/v1/jobs", json={**JOB, "id": "etl-load", "command": "rm"})
    assert twice.status_code == 409 and twice.json()["error"]["code"] == "id_taken"
    for bad in ["dag_x", "has.dot", "run:id", "-dash-first", "x" * 101, "sp ace", "é"]:
        reply = await http.post("/api/v1/jobs", json={**JOB, "id": bad})
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["details"]["field"] == "$.id"
    for bad in ["dag_x", "has.dot", "x" * 101]:
        reply = await http.put(f"/api/v1/jobs/{bad}", json=JOB)
        assert reply.status_code == 422, (bad, reply.text)
    other = await http.put("/api/v1/jobs/etl-load", json={**JOB, "id": "etl-other"})
    assert other.status_code == 422 and other.json()["error"]["details"]["field"] == "$.id"
    task = await http.put("/api/v1/jobs/t", json={**JOB, "depends_on": ["dag_a.b"]})
    assert task.status_code == 422
    assert await keyspace(redis, namespace) == before
    assert (await http.get("/api/v1/jobs/etl-load")).json()["command"] == "echo v1"


async def test_a_deleted_id_comes_back_as_a_new_incarnation(node, http) -> None:
    await http.put("/api/v1/jobs/gone", json=JOB)
    assert (await http.delete("/api/v1/jobs/gone")).status_code == 200
    reply = await http.put("/api/v1/jobs/gone", json=JOB)
    assert reply.status_code == 201 and reply.json()["incarnation"] == 2


async def test_a_paused_job_stays_paused_and_a_new_schedule_is_replanned(node, http) -> None:
    await http.put("/api/v1/jobs/p", json=JOB)
    await http.patch("/api/v1/jobs/p", json={"status": "paused", "pause_reason": "move"})
    reply = await http.put("/api/v1/jobs/p", json={**JOB, "command": "echo paused"})
    body = reply.json()
    assert body["status"] == "paused" and body["pause_reason"] == "move"
    assert body["next_run_at"] is None
    await http.put("/api/v1/jobs/q", json=JOB)
    first = (await http.get("/api/v1/jobs/q")).json()["next_run_at"]
    moved = await http.put(
        "/api/v1/jobs/q", json={**JOB, "schedule": {"type": "interval", "every_s": 60}}
    )
    assert moved.json()["next_run_at"] < first


async def test_sdk_put_job_and_duplicate_ids_in_a_batch(node, redis, dep) -> None:
    spec = JobSpec(name="sdk", command="true", schedule=IntervalSchedule(every_s=60))
    job, outcome = await drive_async(declare.put_job(dep, "sdk-put", spec), redis)
    assert outcome == declare.Outcome.CREATED and job.job_id == "sdk-put"
    job, outcome = await drive_async(declare.put_job(dep, "sdk-put", spec, if_match=1), redis)
    assert outcome == declare.Outcome.UNCHANGED
    with pytest.raises(PreconditionFailed):
        await drive_async(declare.put_job(dep, "sdk-put", spec, if_match=7), redis)
    twice = [msgspec.structs.replace(spec, id="same")] * 2
    with pytest.raises(ValidationError, match="given twice") as caught:
        await drive_async(create_jobs(dep, twice), redis)
    assert caught.value.field == "$[1].id"


async def test_a_team_puts_only_its_own_names_and_ids(node, http, redis, dep) -> None:
    request = TokenRequest(name="team-a", scopes=[Scope.WRITE, Scope.READ], prefixes=["a-"])
    secret = (await drive_async(tokens.create_token(dep, request, "tests"), redis)).token
    team = {"authorization": f"Bearer {secret}"}
    await http.put("/api/v1/jobs/b-owned", json={**JOB, "name": "b-job"})
    theirs = await http.put("/api/v1/jobs/b-owned", json={**JOB, "name": "a-job"}, headers=team)
    unknown = await http.get("/api/v1/jobs/no-such-id", headers=team)
    assert theirs.status_code == 404  # another team's id: as unknown as any, and left alone
    assert theirs.json()["error"]["code"] == unknown.json()["error"]["code"] == "not_found"
    assert (await http.get("/api/v1/jobs/b-owned")).json()["name"] == "b-job"
    outside = await http.put("/api/v1/jobs/new", json={**JOB, "name": "b-job"}, headers=team)
    assert outside.status_code == 403
    mine = await http.put("/api/v1/jobs/a-mine", json={**JOB, "name": "a-job"}, headers=team)
    assert mine.status_code == 201


def dag_body(*tasks: dict, **fields) -> dict:
    return {"name": "etl", "schedule": FAR, "tasks": list(tasks), **fields}


FAR = {"type": "once", "at": "2099-01-01T00:00:00Z"}  # fires only when triggered


async def test_a_dag_changes_as_a_new_version_and_open_runs_finish_on_theirs(
    node, worker, http, redis, namespace, tmp_path
) -> None:
    log, gate = tmp_path / "log", tmp_path / "gate"
    wait = f"while [ ! -f {gate} ]; do sleep 0.05; done; echo a1 >> {log}"
    v1 = dag_body(
        {"name": "a", "command": wait},
        {"name": "b", "command": f"echo b1 >> {log}", "depends_on": ["a"]},
    )
    created = await http.put("/api/v1/dags/dag_etl", json=v1)
    assert created.status_code == 201 and created.json()["dag_id"] == "dag_etl"
    assert (await http.put("/api/v1/dags/dag_etl", json=v1)).headers[
        "shardsched-outcome"
    ] == "unchanged"
    first = (await http.post("/api/v1/dags/dag_etl/trigger")).json()["dag_run_id"]
    queued = (await http.post("/api/v1/dags/dag_etl/trigger")).json()["dag_run_id"]

    async def a_running() -> bool:
        run = (await http.get(f"/api/v1/dag-runs/{first}")).json()
        return run["tasks"][0]["state"] == "running"

    await wait_until(a_running)
    # v2: b removed, c added after a, a's command changed
    v2 = dag_body(
        {"name": "a", "command": f"echo a2 >> {log}"},
        {"name": "c", "command": f"echo c2 >> {log}", "depends_on": ["a"]},
    )
    stale = await http.put("/api/v1/dags/dag_etl", json=v2, headers={"if-match": '"7"'})
    assert stale.status_code == 412
    changed = await http.put("/api/v1/dags/dag_etl", json=v2, headers={"if-match": '"1"'})
    assert changed.status_code == 200, changed.text
    assert changed.json()["version"] == 2
    assert [t["name"] for t in changed.json()["tasks"]] == ["a", "c"]
    kept = [key for key in await keyspace(redis, namespace) if b"dagv:dag_etl:" in key]
    assert len(kept) == 1  # the first version, held by the two runs opened on it
    later = (await http.post("/api/v1/dags/dag_etl/trigger")).json()["dag_run_id"]
    gate.touch()

    async def settled(drid: str) -> dict | None:
        run = (await http.get(f"/api/v1/dag-runs/{drid}")).json()
        return run if run["state"] in ("succeeded", "failed") else None

    runs = [await wait_until(lambda d=d: settled(d), 30) for d in (first, queued, later)]
    assert [r["state"] for r in runs] == ["succeeded"] * 3
    assert [[t["task"] for t in r["tasks"]] for r in runs] == [["a", "b"], ["a", "b"], ["a", "c"]]
    assert sorted(log.read_text().split()) == ["a1", "a1", "a2", "b1", "b1", "c2"]
    # no run uses the first version now; its count is gone and it waits for a node to
    # delete it (a worker's completion may not: it says what a task runs), which the next
    # DAG run a node opens does
    keys = await keyspace(redis, namespace)
    assert not [k for k in keys if b":dagvn:" in k] and [k for k in keys if b":dagvgc:" in k]
    again = (await http.post("/api/v1/dags/dag_etl/trigger")).json()["dag_run_id"]
    assert (await wait_until(lambda: settled(again), 30))["state"] == "succeeded"
    assert not [key for key in await keyspace(redis, namespace) if b"dagv" in key]
    removed = (await http.get("/api/v1/jobs/dag_etl.b/runs")).json()["runs"]
    assert len(removed) == 2  # the retired task's runs stay readable
