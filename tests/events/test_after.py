"""Jobs that run after another's outcome (``on: [{after: ...}]``), on a real node and
worker: a chain of three runs once per upstream success, each run records its cause;
``when`` picks the outcome; a re-run of the same upstream tick runs the next again only
under ``every_time``; a DAG run's outcome triggers too; a paused downstream holds; an
unknown upstream and a cycle are refused naming them, and write nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
import trio

from conftest import keyspace, rounds_later, wait_until
from shardsched import JobSpec, OnceSchedule, OnRule, ValidationError
from shardsched.ops.jobs.define import create_jobs
from shardsched.store.drive import drive_async

PAST = datetime(2020, 1, 1, tzinfo=UTC)
ONCE = {"type": "once", "at": "2020-01-01T00:00:00Z"}


async def job(http: httpx.AsyncClient, job_id: str, **fields) -> dict:
    body = {"name": job_id, "command": "true", **fields}
    reply = await http.put(f"/api/v1/jobs/{job_id}", json=body)
    assert reply.status_code in (200, 201), reply.text
    return reply.json()


async def runs_of(http: httpx.AsyncClient, job_id: str) -> list[dict]:
    return (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 100})).json()["runs"]


async def settle(http: httpx.AsyncClient, job_id: str, n: int) -> list[dict]:
    async def done() -> list[dict] | None:
        runs = await runs_of(http, job_id)
        ended = [r for r in runs if r["state"] in ("succeeded", "failed", "dead_letter")]
        return runs if len(ended) >= n else None

    return await wait_until(done, timeout=30)


async def test_a_chain_of_three_runs_once_per_success(http, node, worker) -> None:
    await job(http, "extract", schedule={"type": "interval", "every_s": 3600})
    await job(http, "transform", on=[{"after": "job:extract"}])
    await job(http, "load", on=[{"after": "job:transform", "when": "succeeded"}])
    for _ in range(2):
        await http.post("/api/v1/jobs/extract/trigger")
        await settle(http, "extract", _ + 1)
    loads = await settle(http, "load", 2)
    transforms = await runs_of(http, "transform")
    assert len(transforms) == 2 and len(loads) == 2
    extracts = await runs_of(http, "extract")
    causes = sorted(r["cause"] for r in transforms)
    assert causes == sorted(f"after:{r['run_id']}" for r in extracts)
    assert sorted(r["cause"] for r in loads) == sorted(f"after:{r['run_id']}" for r in transforms)


async def test_when_picks_the_outcome(http, node, worker) -> None:
    await job(http, "flaky", command="exit 3", schedule={"type": "interval", "every_s": 3600})
    await job(http, "on-fail", on=[{"after": "job:flaky", "when": "failed"}])
    await job(http, "on-ok", on=[{"after": "job:flaky"}])
    await job(http, "on-end", on=[{"after": "job:flaky", "when": "finished"}])
    await http.post("/api/v1/jobs/flaky/trigger")
    await settle(http, "on-fail", 1)
    await settle(http, "on-end", 1)
    assert await runs_of(http, "on-ok") == []


async def test_a_rerun_of_the_same_tick_only_under_every_time(
    http, node, worker, redis, dep
) -> None:
    retry = {"max_attempts": 2, "base_s": 0, "jitter": False}
    await job(http, "up", command="exit 1", schedule={"type": "interval", "every_s": 3600},
              retry_policy=retry)  # fmt: skip
    await job(http, "once", on=[{"after": "job:up", "when": "finished"}])
    await job(http, "every", on=[{"after": "job:up", "when": "finished", "rerun": "every_time"}])
    await http.post("/api/v1/jobs/up/trigger")
    await settle(http, "up", 2)
    await settle(http, "every", 1)
    (failed,) = [r for r in await runs_of(http, "up") if r["state"] == "dead_letter"]
    retried = await http.post(f"/api/v1/runs/{failed['run_id']}/retry")
    assert retried.status_code == 201, retried.text
    await settle(http, "up", 3)
    await settle(http, "every", 2)
    assert len(await runs_of(http, "once")) == 1  # the same tick: once


async def test_after_a_dag_run_and_a_task(http, node, worker) -> None:
    dag = {"name": "etl", "schedule": {"type": "interval", "every_s": 3600},
           "tasks": [{"name": "a", "command": "true"}, {"name": "b", "command": "true",
                     "depends_on": ["a"]}]}  # fmt: skip
    assert (await http.put("/api/v1/dags/etl", json=dag)).status_code in (200, 201)
    await job(http, "after-dag", on=[{"after": "dag:etl"}])
    await job(http, "after-task", on=[{"after": "task:etl.a"}])
    drid = (await http.post("/api/v1/dags/dag_etl/trigger")).json()["dag_run_id"]
    (run,) = await settle(http, "after-dag", 1)
    assert run["cause"] == f"after:{drid}"
    (task_run,) = await settle(http, "after-task", 1)
    assert task_run["cause"].startswith("after:dag_etl.a:")


async def test_a_paused_downstream_holds_then_runs(http, node, worker) -> None:
    await job(http, "up2", schedule={"type": "interval", "every_s": 3600})
    await job(http, "down2", on=[{"after": "job:up2"}])
    await http.patch("/api/v1/jobs/down2", json={"status": "paused"})
    await http.post("/api/v1/jobs/up2/trigger")
    await settle(http, "up2", 1)
    await http.patch("/api/v1/jobs/down2", json={"status": "active"})
    (run,) = await settle(http, "down2", 1)
    assert run["cause"].startswith("after:up2:t1:")


async def test_unknown_upstreams_and_cycles_are_refused(http, node, redis, namespace) -> None:
    await job(http, "a", schedule={"type": "interval", "every_s": 3600})
    await job(http, "b", on=[{"after": "job:a"}])
    await job(http, "c", on=[{"after": "job:b"}])
    before = await keyspace(redis, namespace)
    for body, said in [
        ({"on": [{"after": "job:c"}]}, "a cycle: a runs after c runs after b runs after a"),
        ({"on": [{"after": "job:a"}]}, "a cycle: a runs after a"),
        ({"on": [{"after": "job:nope"}]}, "job:nope: there is no such job"),
        ({"on": [{"after": "dag:nope"}]}, "dag:nope: there is no such job"),
        ({"on": [{"after": "job:b", "filter": {"x": 1}}]}, "`filter` and `args` are an event's"),
        ({"on": [{"event": "e", "when": "failed"}]}, "`when` and `rerun` are `after`'s"),
        ({"on": [{"event": "e", "after": "job:b"}]}, "either `event` or `after`"),
        ({"on": [{"after": "jobs-b"}]}, "matching regex"),
    ]:
        reply = await http.patch("/api/v1/jobs/a", json=body)
        assert reply.status_code == 422, (body, reply.text)
        assert said in reply.json()["error"]["message"], (body, reply.text)
    assert await keyspace(redis, namespace) == before


async def test_a_chain_declared_in_one_batch(http, node, worker, redis, dep) -> None:
    specs = [
        JobSpec(id="c1", name="c1", command="true", on=[OnRule(after="job:c0")]),
        JobSpec(id="c0", name="c0", command="true", schedule=OnceSchedule(at=PAST)),
    ]
    await drive_async(create_jobs(dep, specs), redis)  # one batch: c1 written first
    (run,) = await settle(http, "c1", 1)
    assert run["cause"].startswith("after:c0:")


async def test_a_dag_runs_after_a_job_and_on_an_event(http, node, worker) -> None:
    await job(http, "feeder", schedule={"type": "interval", "every_s": 3600})
    dag = {"name": "etl2", "schedule": {"type": "triggered"},
           "on": [{"after": "job:feeder"}, {"event": "etl.go", "when_paused": "keep_latest"}],
           "tasks": [{"name": "a", "command": "true"}]}  # fmt: skip
    assert (await http.put("/api/v1/dags/etl2", json=dag)).status_code == 201
    shown = (await http.get("/api/v1/dags/dag_etl2")).json()
    assert shown["next_run_at"] is None and len(shown["on"]) == 2
    feeder = (await http.post("/api/v1/jobs/feeder/trigger")).json()["run_id"]

    async def dag_runs(n: int) -> list[dict] | None:
        runs = (await http.get("/api/v1/dags/dag_etl2/runs")).json()["dag_runs"]
        return runs if len(runs) >= n else None

    (opened,) = await wait_until(lambda: dag_runs(1), timeout=30)
    assert opened["cause"] == f"after:{feeder}"
    event = (await http.post("/api/v1/events/etl.go", json={"payload": {"day": "x"}})).json()
    (d,) = event["outcome"]["deliveries"]
    assert d["job_id"] == "dag_etl2" and d["result"] == "created"
    runs = await wait_until(lambda: dag_runs(2), timeout=30)
    assert {r["cause"] for r in runs} == {f"after:{feeder}", f"event:{event['event_id']}"}
    await http.patch("/api/v1/dags/dag_etl2", json={"status": "paused"})
    held = [(await http.post("/api/v1/events/etl.go", json={})).json() for _ in range(2)]
    assert [e["outcome"]["outcome"] for e in held] == ["held", "held"]
    await http.patch("/api/v1/dags/dag_etl2", json={"status": "active"})
    runs = await wait_until(lambda: dag_runs(3), timeout=30)
    assert f"event:{held[1]['event_id']}" in {r["cause"] for r in runs}  # the latest kept
    assert f"event:{held[0]['event_id']}" not in {r["cause"] for r in runs}


async def test_declared_in_an_app(http, node, worker, redis, dep) -> None:
    from shardsched.core.apps import App
    from shardsched.ops.apps.deploy import deploy_app

    app = App("pipes")
    app.job(id="p-extract", every="1h")(lambda ctx: None)
    app.job(id="p-load", on=[{"after": "job:p-extract"}])(lambda ctx: None)

    def step(ctx) -> None:
        del ctx

    app.dag("p-dag", on=[{"event": "pipes.go"}]).task()(step)
    op = deploy_app(dep, app.name, dict(app.jobs()), dict(app.dags()), False, "tests")
    result = await drive_async(op, redis)
    assert result.counts() == {"created": 3}, result
    load = (await http.get("/api/v1/jobs/p-load")).json()
    assert load["schedule"] == {"type": "triggered"} and load["on"] == [{"after": "job:p-extract"}]
    dag = (await http.get("/api/v1/dags/dag_p-dag")).json()
    assert dag["schedule"] == {"type": "triggered"} and dag["on"] == [{"event": "pipes.go"}]


async def test_two_writes_at_once_cannot_close_a_cycle(http, node) -> None:
    """Each write of an `after` rule is checked and written holding one lock: of x after y
    and y after x sent at once, one is refused (found by the independent tester: both
    were accepted, and x and y then ran each other forever)."""
    for round_ in range(6):
        x, y = f"x{round_}", f"y{round_}"
        for job_id in (x, y):
            await job(http, job_id, schedule={"type": "interval", "every_s": 3600})
        replies: dict = {}

        async def patch(a: str, b: str, replies: dict = replies) -> None:
            body = {"on": [{"after": f"job:{b}"}]}
            replies[a] = await http.patch(f"/api/v1/jobs/{a}", json=body)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(patch, x, y)
            nursery.start_soon(patch, y, x)
        codes = sorted(r.status_code for r in replies.values())
        # one written, the other refused: the cycle it would close (422), or, on a box
        # too loaded for the lock to come free in time, "try again" (409)
        assert codes in ([200, 422], [200, 409]), {k: r.text for k, r in replies.items()}


async def test_an_app_declaring_its_chain_downstream_first(http, node, redis, dep) -> None:
    """Found by the independent tester: a deploy wrote in declaration order, so an app
    whose downstream came first was refused while its dry run said it would be created."""
    from shardsched.core.apps import App
    from shardsched.ops.apps.deploy import deploy_app

    app = App("backwards")
    app.job(id="bw-load", on=[{"after": "job:bw-extract"}])(lambda ctx: None)
    app.job(id="bw-extract", every="1h")(lambda ctx: None)
    op = deploy_app(dep, app.name, dict(app.jobs()), dict(app.dags()), False, "tests")
    result = await drive_async(op, redis)
    assert [c.id for c in result.changes] == ["bw-extract", "bw-load"]
    cyclic = App("loops")
    cyclic.job(id="l-a", on=[{"after": "job:l-b"}])(lambda ctx: None)
    cyclic.job(id="l-b", on=[{"after": "job:l-a"}])(lambda ctx: None)
    for dry_run in (True, False):
        op = deploy_app(dep, cyclic.name, dict(cyclic.jobs()), {}, dry_run, "tests")
        with pytest.raises(ValidationError, match="a cycle: l-a runs after l-b runs after l-a"):
            await drive_async(op, redis)
    assert (await http.get("/api/v1/jobs/l-a")).status_code == 404


async def test_a_cycle_through_a_dags_task_is_refused(http, node) -> None:
    """A job after a DAG's task, while the DAG runs after that job: the task runs only
    when its DAG does, so this is a cycle (x -> etl3.a -> etl3 -> x), refused."""
    await job(http, "x3", schedule={"type": "interval", "every_s": 3600})
    dag = {"name": "etl3", "schedule": {"type": "triggered"}, "on": [{"after": "job:x3"}],
           "tasks": [{"name": "a", "command": "true"}]}  # fmt: skip
    assert (await http.put("/api/v1/dags/etl3", json=dag)).status_code == 201
    reply = await http.patch("/api/v1/jobs/x3", json={"on": [{"after": "task:etl3.a"}]})
    assert reply.status_code == 422, reply.text
    assert "a cycle: x3 runs after dag_etl3.a runs after dag_etl3 runs after x3" in reply.text


async def test_a_chain_that_comes_back_on_itself_stops(http, node, worker, redis, dep,
                                                       monkeypatch) -> None:  # fmt: skip
    """A cycle that slipped past every check (written here straight into Redis) stops
    after MAX_AFTER_DEPTH runs each after the one before, instead of running forever."""
    from shardsched.store import event_delivery

    monkeypatch.setattr(event_delivery, "MAX_AFTER_DEPTH", 4)
    await job(http, "ping", schedule={"type": "interval", "every_s": 3600})
    await job(http, "pong", on=[{"after": "job:ping"}])
    sk = dep.keys_for("ping")
    spec = json.loads(await redis.execute("HGET", sk.job("ping"), "spec"))
    spec["on"] = [{"after": "job:pong"}]
    await redis.execute("HSET", sk.job("ping"), "spec", json.dumps(spec))
    await redis.execute("SADD", dep.globals.after("pong"), "ping")
    await redis.execute("HSET", dep.keys_for("pong").job("pong"), "ds", "1")
    await http.post("/api/v1/jobs/ping/trigger")

    async def stopped() -> int | None:
        runs = await runs_of(http, "ping") + await runs_of(http, "pong")
        done = all(r["state"] == "succeeded" for r in runs)
        return len(runs) if done and len(runs) >= 5 else None

    n = await wait_until(stopped, timeout=40)
    await rounds_later(lambda: node.maintainer.rounds, 3)  # nothing more comes
    assert len(await runs_of(http, "ping") + await runs_of(http, "pong")) == n == 5


async def test_after_any_job_with_matching_labels(http, node, worker) -> None:
    """``after: labels:team=data``: any job with those labels, made before the rule or
    after it, runs the job when it ends as ``when`` says; a job with other labels does
    not; a job its own selector names is refused (it would run after itself)."""
    every = {"type": "interval", "every_s": 3600}
    await job(http, "d-old", command="exit 1", schedule=every, labels={"team": "data"})
    await job(http, "o-job", command="exit 1", schedule=every, labels={"team": "ops"})
    await job(http, "alert", on=[{"after": "labels:team=data", "when": "failed"}])
    await job(http, "d-new", command="exit 1", schedule=every, labels={"team": "data", "x": "1"})
    await job(http, "d-late", command="exit 1", schedule=every)
    await http.patch("/api/v1/jobs/d-late", json={"labels": {"team": "data"}})  # joins later
    for job_id in ("d-old", "o-job", "d-new", "d-late"):
        await http.post(f"/api/v1/jobs/{job_id}/trigger")
    runs = await settle(http, "alert", 3)
    causes = sorted(r["cause"].split(":")[1] for r in runs)
    assert causes == ["d-late", "d-new", "d-old"]
    await rounds_later(lambda: node.maintainer.rounds, 2)
    assert len(await runs_of(http, "alert")) == 3  # not o-job's
    selfish = {"name": "s", "command": "true", "labels": {"team": "data"},
               "on": [{"after": "labels:team=data"}]}  # fmt: skip
    reply = await http.put("/api/v1/jobs/selfish", json=selfish)
    assert reply.status_code == 422 and "which it is itself" in reply.text, reply.text
