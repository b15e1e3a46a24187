"""A deleted job's id created again, or restored: a new incarnation whose earlier history
stays readable and whose run ids never collide with the old ones (issue #31)."""

from __future__ import annotations

from datetime import datetime, timedelta

from conftest import wait_until

EVERY = {"type": "interval", "every_s": 0.4}


def ms(text: str) -> float:
    return datetime.fromisoformat(text).timestamp() * 1000


async def runs_of(http, job_id: str) -> list[dict]:
    reply = await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 500})
    return reply.json()["runs"]


async def succeeded(http, job_id: str, at_least: int, after: float = 0) -> list[dict] | None:
    done = [
        r
        for r in await runs_of(http, job_id)
        if r["state"] == "succeeded" and ms(r["scheduled_for"]) >= after
    ]
    return done if len(done) >= at_least else None


async def test_a_deleted_id_comes_back_as_a_new_incarnation(node, worker, http) -> None:
    body = {"id": "nightly", "name": "nightly", "command": "echo one", "schedule": EVERY}
    assert (await http.post("/api/v1/jobs", json=body)).status_code == 201
    trig = (await http.post("/api/v1/jobs/nightly/trigger")).json()["run_id"]
    assert trig == "nightly:t1:1"
    await wait_until(lambda: succeeded(http, "nightly", 3))
    gone = (await http.delete("/api/v1/jobs/nightly")).json()
    assert gone["status"] == "deleted" and gone["incarnation"] == 1
    refused = await http.post("/api/v1/jobs/nightly/trigger")
    assert refused.status_code == 409 and "restore" in refused.json()["error"]["message"]
    old_runs = {r["run_id"] for r in await runs_of(http, "nightly")}

    # created again under its id: a new incarnation, not "id taken"
    again = await http.post("/api/v1/jobs", json={**body, "command": "echo two"})
    assert again.status_code == 201, again.text
    assert again.json()["recreated"] is True
    job = (await http.get("/api/v1/jobs/nightly")).json()
    assert job["status"] == "active" and job["command"] == "echo two"
    assert job["incarnation"] == 2 and job["version"] == gone["version"] + 1
    born = ms(job["incarnation_started_at"])
    assert born >= ms(gone["updated_at"])
    new = await wait_until(lambda: succeeded(http, "nightly", 3, after=born))
    assert all(ms(r["scheduled_for"]) >= born for r in new)
    runs = {r["run_id"] for r in await runs_of(http, "nightly")}
    assert old_runs <= runs, "the earlier incarnation's history stays readable"
    assert (await http.post("/api/v1/jobs/nightly/trigger")).json()["run_id"] == "nightly:t2:1"

    # history: every version and the change log say what happened
    versions = (await http.get("/api/v1/jobs/nightly/versions")).json()["versions"]
    assert [v["status"] for v in versions][-2:] == ["deleted", "active"]
    changes = (await http.get("/api/v1/jobs/nightly/changes")).json()["changes"]
    assert "recreate" in [c["action"] for c in changes]
    # a backfill cannot reach into the earlier incarnation's ticks
    window = {
        "since": datetime.fromtimestamp((born - 5000) / 1000).astimezone().isoformat(),
        "until": datetime.fromtimestamp(born / 1000).astimezone().isoformat(),
    }
    reply = await http.post("/api/v1/jobs/nightly/backfill", json=window)
    assert reply.status_code == 422 and reply.json()["error"]["details"]["field"] == "$.since"

    # delete and restore: the last definition, incarnation 3
    await http.delete("/api/v1/jobs/nightly")
    restored = await http.post("/api/v1/jobs/nightly/restore")
    assert restored.status_code == 201, restored.text
    assert restored.json()["incarnation"] == 3 and restored.json()["command"] == "echo two"
    assert (await http.post("/api/v1/jobs/nightly/restore")).status_code == 409
    assert (await http.post("/api/v1/jobs/nobody/restore")).status_code == 404
    # PUT (what `apply` sends) re-creates a deleted id too
    await http.delete("/api/v1/jobs/nightly")
    put = await http.put("/api/v1/jobs/nightly", json={**body, "id": None, "command": "echo 3"})
    assert put.status_code in (200, 201), put.text
    assert put.json()["incarnation"] == 4
    await http.patch("/api/v1/jobs/nightly", json={"status": "paused"})

    # the ledger: no tick of any incarnation missing or doubled, and no id reused
    after = (await http.get("/api/v1/jobs/nightly/ticks", params={"limit": 1000})).json()
    assert not [t for t in after["ticks"] if t["outcome"] in ("missing", "duplicated")]
    ids = [r["run_id"] for r in await runs_of(http, "nightly")]
    assert len(ids) == len(set(ids))
    assert timedelta(0) < datetime.fromisoformat(put.json()["incarnation_started_at"]) - (
        datetime.fromisoformat(job["incarnation_started_at"])
    )


async def test_a_deleted_dag_comes_back_as_a_new_incarnation(node, worker, http) -> None:
    dag = {
        "name": "wf",
        "schedule": EVERY,
        "max_active_runs": 1,
        "tasks": [
            {"name": "a", "command": "true"},
            {"name": "b", "command": "true", "depends_on": ["a"]},
        ],
    }

    async def dag_runs(after: float = 0) -> list[dict]:
        out = (await http.get("/api/v1/dags/wf/runs", params={"limit": 200})).json()["dag_runs"]
        return [r for r in out if r["state"] == "succeeded" and ms(r["scheduled_for"]) >= after]

    assert (await http.put("/api/v1/dags/wf", json=dag)).status_code == 201
    await wait_until(lambda: _at_least(dag_runs(), 2))
    gone = (await http.delete("/api/v1/dags/wf")).json()
    assert gone["status"] == "deleted"
    old = {r["dag_run_id"] for r in (await http.get("/api/v1/dags/wf/runs")).json()["dag_runs"]}

    again = await http.put("/api/v1/dags/wf", json={**dag, "max_active_runs": 2})
    assert again.status_code == 201, again.text
    body = again.json()
    assert body["status"] == "active" and body["incarnation"] == 2 and body["max_active_runs"] == 2
    born = ms(body["incarnation_started_at"])
    await wait_until(lambda: _at_least(dag_runs(after=born), 2))
    now = {r["dag_run_id"] for r in (await http.get("/api/v1/dags/wf/runs")).json()["dag_runs"]}
    assert old <= now, "the earlier incarnation's DAG runs stay"
    changes = (await http.get("/api/v1/dags/wf/changes")).json()["changes"]
    assert "recreate" in [c["action"] for c in changes]

    await http.delete("/api/v1/dags/wf")
    restored = await http.post("/api/v1/dags/wf/restore")
    assert restored.status_code == 201 and restored.json()["incarnation"] == 3
    assert restored.json()["max_active_runs"] == 2
    assert (await http.post("/api/v1/dags/wf/restore")).status_code == 409
    await http.patch("/api/v1/dags/wf", json={"status": "paused"})


async def _at_least(runs, n: int) -> bool:
    return len(await runs) >= n
