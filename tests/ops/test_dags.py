"""DAGs end to end (issue #6): registration, DAG runs, release on completion, trigger rules,
upstream failure propagation, max_active_runs, the API, and the stall report."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import httpx
import trio

from conftest import drive_list, keyspace, rounds_later, wait_until
from shardsched.core.models import DagSpec, OnceSchedule, TaskSpec
from shardsched.ops import listing
from shardsched.ops.dags import dag_runs
from shardsched.ops.dags import manage as dag_ops
from shardsched.store.drive import call_script
from shardsched.store.drive import drive_async as drive
from shardsched.store.lua import runs as runs_lua
from shardsched.worker.worker import Worker

FAR = {"type": "once", "at": "2099-01-01T00:00:00Z"}  # fires only when triggered
NO_RETRY = {"max_attempts": 1}


def ms(text: str | None) -> float:
    assert text is not None
    return datetime.fromisoformat(text).timestamp() * 1000


def task(name: str, command: str = "true", *deps: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": command, "depends_on": list(deps), **fields}


async def create_dag(http: httpx.AsyncClient, tasks: list[dict], **fields: Any) -> str:
    body = {"name": "d", "schedule": FAR, "tasks": tasks, **fields}
    reply = await http.post("/api/v1/dags", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()["dag_id"]


async def trigger(http: httpx.AsyncClient, dag_id: str) -> str:
    reply = await http.post(f"/api/v1/dags/{dag_id}/trigger")
    assert reply.status_code == 201, reply.text
    return reply.json()["dag_run_id"]


async def finished(http: httpx.AsyncClient, drid: str, timeout: float = 20) -> dict:
    async def done() -> dict | None:
        run = (await http.get(f"/api/v1/dag-runs/{drid}")).json()
        return run if run["state"] in ("succeeded", "failed") else None

    return await wait_until(done, timeout=timeout)


def by_task(run: dict) -> dict[str, dict]:
    return {t["task"]: t for t in run["tasks"]}


async def test_etl_runs_in_order(node, worker, http, tmp_path) -> None:
    env = tmp_path / "env"
    dag_id = await create_dag(
        http,
        [
            task("extract", "sleep 0.2"),
            task("transform", "sleep 0.2", "extract"),
            task("load", f"echo $SHARDSCHED_DAG_RUN_ID $SHARDSCHED_JOB_ID > {env}", "transform"),
        ],
    )
    drid = await trigger(http, dag_id)
    run = await finished(http, drid)
    assert run["state"] == "succeeded" and run["dag_id"] == dag_id and run["manual"]
    tasks = by_task(run)
    assert [t["state"] for t in tasks.values()] == ["succeeded"] * 3
    extract, transform, load = (tasks[n]["attempts"] for n in ("extract", "transform", "load"))
    assert len(extract) == len(transform) == len(load) == 1
    # each started after the previous ended, by the ledger's own (server clock) timestamps
    assert ms(transform[0]["started_at"]) >= ms(extract[0]["finished_at"])
    assert ms(load[0]["started_at"]) >= ms(transform[0]["finished_at"])
    assert all(a[0]["dag_run_id"] == drid for a in (extract, transform, load))
    assert ms(run["finished_at"]) >= ms(load[0]["finished_at"])
    assert env.read_text().split() == [drid, f"{dag_id}.load"]


async def test_dead_letter_skips_downstream_and_fails_the_dag_run(node, worker, http) -> None:
    retry = {"max_attempts": 2, "base_s": 0.1, "max_s": 0.1, "jitter": False}
    dag_id = await create_dag(
        http,
        [
            task("extract", "exit 3", retry_policy=retry),
            task("transform", "true", "extract"),
            task("load", "true", "transform"),
            task("report", "true", "extract", trigger_rule="all_done"),
        ],
    )
    run = await finished(http, await trigger(http, dag_id))
    tasks = by_task(run)
    assert run["state"] == "failed"
    assert tasks["extract"]["state"] == "dead_letter"
    assert [a["state"] for a in tasks["extract"]["attempts"]] == ["failed", "dead_letter"]
    for name in ("transform", "load"):
        assert tasks[name]["state"] == "skipped"
        assert tasks[name]["reason"] == "upstream_failed"
        assert tasks[name]["attempts"][0]["started_at"] is None, "never ran"
    assert tasks["report"]["state"] == "succeeded", "all_done runs whatever the outcome"
    # retried from the dead letter, the task resumes its DAG run (issue #50): a new
    # attempt, its skipped downstream decided again, the task that succeeded kept
    rid = tasks["extract"]["run_id"]
    reply = await http.post(f"/api/v1/runs/{rid}/retry")
    assert reply.status_code == 201 and reply.json()["run_id"] == rid[:-1] + "3"
    run = await finished(http, run["dag_run_id"])
    tasks = by_task(run)
    assert run["state"] == "failed" and tasks["extract"]["run_id"] == rid[:-1] + "3"
    assert tasks["transform"]["state"] == "skipped" and tasks["transform"]["run_id"].endswith(":2")
    assert tasks["report"]["run_id"].endswith(":1")  # it succeeded: kept


async def test_trigger_rules(node, worker, http) -> None:
    dag_id = await create_dag(
        http,
        [
            task("ok", "true"),
            task("bad", "exit 1", retry_policy=NO_RETRY),
            task("cleanup", "true", "ok", "bad", trigger_rule="one_failed"),
            task("never", "true", "ok", trigger_rule="one_failed"),
            task("tolerant", "true", "never", "ok", trigger_rule="none_failed"),
            task("strict", "true", "ok", "bad"),
            task("after", "true", "strict", trigger_rule="none_failed"),
        ],
    )
    run = await finished(http, await trigger(http, dag_id))
    states = {n: (t["state"], t["reason"]) for n, t in by_task(run).items()}
    assert states == {
        "ok": ("succeeded", None),
        "bad": ("failed", "exit 1"),  # one attempt: failed for good, as a dead letter is
        "cleanup": ("succeeded", None),
        "never": ("skipped", "no upstream task failed (one_failed)"),
        "tolerant": ("succeeded", None),  # a skipped dependency is not a failure
        "strict": ("skipped", "upstream_failed"),
        # a task skipped because its upstream failed counts as failed downstream
        "after": ("skipped", "upstream_failed"),
    }
    assert run["state"] == "failed"


async def test_bad_dags_answer_422_naming_the_field_and_write_nothing(
    http, redis, namespace
) -> None:
    before = await keyspace(redis, namespace)
    cases = [
        ([task("a", "true", "ghost")], "$.tasks[0].depends_on[0]", "unknown dependency 'ghost'"),
        ([task("a"), task("a")], "$.tasks[1].name", "duplicate task name 'a'"),
        (
            [task("a", "true", "c"), task("b", "true", "a"), task("c", "true", "b")],
            "$.tasks[0].depends_on",
            "dependency cycle: a -> c -> b -> a",
        ),
        ([task("a.b")], "$.tasks[0].name", ""),
        ([task("a", trigger_rule="sometimes")], "$.tasks[0].trigger_rule", ""),
        ([], "$.tasks", ""),
    ]
    for tasks, field, message in cases:
        body = {"name": "d", "schedule": FAR, "tasks": tasks}
        reply = await http.post("/api/v1/dags", json=body)
        assert reply.status_code == 422, (tasks, reply.text)
        error = reply.json()["error"]
        assert error["details"]["field"] == field and message in error["message"], error
    bad_cron = {"name": "d", "schedule": {"type": "cron", "expression": "61 * * * *"}}
    reply = await http.post("/api/v1/dags", json={**bad_cron, "tasks": [task("a")]})
    assert reply.status_code == 422
    assert reply.json()["error"]["details"]["field"] == "$.schedule.expression"
    assert await keyspace(redis, namespace) == before


async def test_diamond_releases_its_join_once_when_both_branches_finish_together(
    redis, dep
) -> None:
    """b and c complete at the same instant from two workers (two connections, calls in
    flight together), 200 times: d is released exactly once each time."""
    spec = DagSpec(
        name="diamond",
        schedule=OnceSchedule(at=datetime(2099, 1, 1, tzinfo=UTC)),
        tasks=[
            TaskSpec(name="a", command="true"),
            TaskSpec(name="b", command="true", depends_on=["a"]),
            TaskSpec(name="c", command="true", depends_on=["a"]),
            TaskSpec(name="d", command="true", depends_on=["b", "c"]),
        ],
        max_active_runs=100,
    )
    dag_id = (await drive(dag_ops.create_dag(dep, spec), redis)).dag_id
    sk = dep.keys_for(dag_id)

    async def claim(worker: str) -> tuple[bytes, bytes, bytes]:
        reply = await call_script(redis, runs_lua.claim(sk, dep.globals, worker, 1))
        assert len(reply) == 9, reply
        return reply[0], reply[1], reply[5]

    async def complete(worker: str, claimed: tuple[bytes, bytes, bytes]) -> None:
        eid, rid, token = claimed
        delivery = runs_lua.Delivery(eid.decode(), rid.decode(), int(token))
        done = runs_lua.Completion(delivery, "succeeded", 0, "", b"", None, "")
        call = runs_lua.complete(sk, dep.globals, worker, [done])
        assert runs_lua.decode_completed(await call_script(redis, call)).codes == [1]

    for _ in range(200):
        drid = (await drive(dag_ops.trigger_dag(dep, dag_id), redis)).dag_run_id
        await complete("w1", await claim("w1"))  # a: releases b and c
        b, c = await claim("w1"), await claim("w2")
        assert {b[1].split(b".")[1][:1], c[1].split(b".")[1][:1]} == {b"b", b"c"}
        async with trio.open_nursery() as nursery:  # both completions in flight at once
            nursery.start_soon(complete, "w1", b)
            nursery.start_soon(complete, "w2", c)
        d = await claim("w1")
        assert d[1] == f"{dag_id}.d:{drid.split(':')[1]}:1".encode()
        assert await call_script(redis, runs_lua.claim(sk, dep.globals, "w2", 10)) == []
        await complete("w1", d)
        run = await drive(dag_runs.get_dag_run(dep, drid), redis)
        assert run.state == "succeeded"
        assert [len(t.attempts) for t in run.tasks] == [1, 1, 1, 1]
    runs_of_d = await redis.execute("ZCARD", sk.runs_of(f"{dag_id}.d"))
    assert runs_of_d == 200
    assert (await drive(dag_ops.get_dag(dep, dag_id), redis)).active_runs == 0


async def test_diamonds_through_two_workers(node, redis, dep, nursery) -> None:
    """The same race for real: 200 diamond DAG runs through two workers' claim loops (one
    slot each, in-process handlers); each d runs exactly once, after both branches."""
    workers = [Worker(redis, dep, worker_id=f"w{i}", concurrency=1) for i in (1, 2)]
    for w in workers:
        await nursery.start(w.run)
    noop = "handler:noop"
    spec = DagSpec(
        name="diamond",
        schedule=OnceSchedule(at=datetime(2099, 1, 1, tzinfo=UTC)),
        tasks=[
            TaskSpec(name="a", command=noop),
            TaskSpec(name="b", command=noop, depends_on=["a"]),
            TaskSpec(name="c", command=noop, depends_on=["a"]),
            TaskSpec(name="d", command=noop, depends_on=["b", "c"]),
        ],
        max_active_runs=100,
    )
    dag_id = (await drive(dag_ops.create_dag(dep, spec), redis)).dag_id
    drids = [(await drive(dag_ops.trigger_dag(dep, dag_id), redis)).dag_run_id for _ in range(200)]

    async def all_done() -> bool:
        runs = await drive_list(listing.dag_runs_page(dep, dag_id, 1000), redis)
        return len(runs) == 200 and all(r.state == "succeeded" for r in runs)

    await wait_until(all_done, timeout=60)
    sk = dep.keys_for(dag_id)
    for name in "abcd":
        assert await redis.execute("ZCARD", sk.runs_of(f"{dag_id}.{name}")) == 200
    by = set()
    for drid in drids:
        run = await drive(dag_runs.get_dag_run(dep, drid), redis)
        tasks = {t.task: t for t in run.tasks}
        assert [len(t.attempts) for t in run.tasks] == [1, 1, 1, 1]
        by.add((tasks["b"].attempts[0].claimed_by, tasks["c"].attempts[0].claimed_by))
        assert tasks["d"].attempts[0].started_at >= max(
            tasks["b"].attempts[0].finished_at, tasks["c"].attempts[0].finished_at
        )
    assert sum(w.completed for w in workers) == 800
    # one slot each: the branches of a DAG run are split over the two workers
    assert ("w1", "w2") in by or ("w2", "w1") in by, by


async def test_a_task_that_fails_then_succeeds_releases_downstream_once(
    node, worker, http, tmp_path
) -> None:
    marker = tmp_path / "failed-once"
    retry = {"max_attempts": 3, "base_s": 0.2, "max_s": 0.2, "jitter": False}
    dag_id = await create_dag(
        http,
        [
            task("flaky", f"test -f {marker} || {{ touch {marker}; exit 1; }}", retry_policy=retry),
            task("after", "true", "flaky"),
            task("last", "true", "after"),
        ],
    )
    run = await finished(http, await trigger(http, dag_id))
    tasks = by_task(run)
    assert run["state"] == "succeeded"
    flaky = tasks["flaky"]["attempts"]
    assert [(a["attempt"], a["state"]) for a in flaky] == [(1, "failed"), (2, "succeeded")]
    assert tasks["flaky"]["run_id"] == flaky[1]["run_id"]
    assert len(tasks["after"]["attempts"]) == 1 and len(tasks["last"]["attempts"]) == 1
    # released by the successful attempt, not by the failed one
    assert ms(tasks["after"]["released_at"]) >= ms(flaky[1]["finished_at"])
    assert ms(tasks["after"]["attempts"][0]["created_at"]) >= ms(flaky[1]["finished_at"])
    listed = (await http.get(f"/api/v1/jobs/{dag_id}.after/runs")).json()["runs"]
    assert [r["run_id"] for r in listed] == [tasks["after"]["run_id"]]


async def test_scheduled_ticks_open_one_dag_run_each(node, worker, http, redis, dep) -> None:
    every = {"type": "interval", "every_s": 0.5}
    body = {"name": "ticking", "schedule": every, "tasks": [task("a"), task("b", "true", "a")]}
    reply = await http.post("/api/v1/dags", json=body)
    assert reply.status_code == 201
    created = reply.json()
    dag_id = created["dag_id"]
    assert created["task_job_ids"] == {"a": f"{dag_id}.a", "b": f"{dag_id}.b"}

    async def three_done() -> list | None:
        runs = (await http.get(f"/api/v1/dags/{dag_id}/runs")).json()["dag_runs"]
        done = [r for r in runs if r["state"] == "succeeded"]
        return runs if len(done) >= 3 else None

    runs = await wait_until(three_done, timeout=15)
    await http.patch(f"/api/v1/dags/{dag_id}", json={"status": "paused"})
    for run in runs:
        tick = run["dag_run_id"].split(":")[1]
        assert ms(run["scheduled_for"]) == int(tick) and not run["manual"]
        # the root is released at the tick (its run carries the tick in its id)
        assert by_task(run)["a"]["run_id"] == f"{dag_id}.a:{tick}:1"
        assert ms(by_task(run)["a"]["released_at"]) >= int(tick)
    ticks = sorted(int(r["dag_run_id"].split(":")[1]) for r in runs)
    assert all(b - a == 500 for a, b in pairwise(ticks))
    report = (await http.get(f"/api/v1/dags/{dag_id}/ticks")).json()
    outcomes = [t["outcome"] for t in report["ticks"]]
    assert "missing" not in outcomes and "duplicated" not in outcomes
    assert outcomes.count("fired") == len(runs)


async def test_max_active_runs_queues_and_records(node, worker, http, tmp_path) -> None:
    gate = tmp_path / "gate"
    hold = task("hold", f"while [ ! -f {gate} ]; do sleep 0.05; done")
    dag_id = await create_dag(http, [hold, task("after", "true", "hold")], max_active_runs=1)
    first = await trigger(http, dag_id)
    second = (await http.post(f"/api/v1/dags/{dag_id}/trigger")).json()
    assert second["state"] == "queued"
    dag = (await http.get(f"/api/v1/dags/{dag_id}")).json()
    assert dag["active_runs"] == 1 and dag["queued_runs"] == 1
    queued = (await http.get(f"/api/v1/dag-runs/{second['dag_run_id']}")).json()
    assert queued["state"] == "queued" and queued["started_at"] is None
    assert {t["state"] for t in queued["tasks"]} == {"waiting"}
    gate.touch()
    one, two = await finished(http, first), await finished(http, second["dag_run_id"])
    assert one["state"] == two["state"] == "succeeded"
    assert ms(two["started_at"]) >= ms(one["finished_at"]), "started when the first ended"
    dag = (await http.get(f"/api/v1/dags/{dag_id}")).json()
    assert dag["active_runs"] == 0 and dag["queued_runs"] == 0


async def test_counts_an_earlier_version_kept_in_the_dags_hash_still_count(
    node, worker, http, redis, dep, tmp_path
) -> None:
    """Upgrading while a DAG run is active: the previous version counted active runs in
    the DAG's own hash ('nact'), this one in its counters hash (cnt:<id>, which a worker's
    Redis role may write); each counter is the sum of both, so the run that ends under
    the new code frees the slot the old code took, and nothing is stuck or doubled."""
    gate = tmp_path / "gate"
    hold = task("hold", f"while [ ! -f {gate} ]; do sleep 0.05; done")
    dag_id = await create_dag(http, [hold], max_active_runs=1)
    first = await trigger(http, dag_id)
    sk = dep.keys_for(dag_id)
    # as the previous version left it: the active run counted in the DAG's hash
    assert await redis.execute("HGET", sk.counters(dag_id), "nact") == b"1"
    await redis.execute("HDEL", sk.counters(dag_id), "nact")
    await redis.execute("HSET", sk.job(dag_id), "nact", 1)
    dag = (await http.get(f"/api/v1/dags/{dag_id}")).json()
    assert dag["active_runs"] == 1
    second = (await http.post(f"/api/v1/dags/{dag_id}/trigger")).json()
    assert second["state"] == "queued", "the old count still holds the one slot"
    gate.touch()
    assert (await finished(http, first))["state"] == "succeeded"
    assert (await finished(http, second["dag_run_id"]))["state"] == "succeeded"
    dag = (await http.get(f"/api/v1/dags/{dag_id}")).json()
    assert dag["active_runs"] == 0 and dag["queued_runs"] == 0
    third = (await http.post(f"/api/v1/dags/{dag_id}/trigger")).json()
    assert third["state"] != "queued"
    assert (await finished(http, third["dag_run_id"]))["state"] == "succeeded"


async def test_a_full_dag_skips_or_supersedes_ticks_per_its_catchup_policy(redis, dep) -> None:
    """With no room, catch-up none records the tick skipped; latest keeps only the newest
    queued run (older ones superseded, recorded); all queues every tick."""
    keys_of = dep.keys_for
    for catchup in ("none", "latest", "all"):
        spec = DagSpec(
            name=catchup,
            schedule=OnceSchedule(at=datetime(2099, 1, 1, tzinfo=UTC)),
            tasks=[TaskSpec(name="a", command="true")],
            catchup=catchup,
        )
        dag_id = (await drive(dag_ops.create_dag(dep, spec), redis)).dag_id
        sk = keys_of(dag_id)
        await drive(dag_ops.trigger_dag(dep, dag_id), redis)  # takes the one slot
        epoch = await redis.execute("INCR", sk.epoch)
        head = (epoch, sk.base, 100, 0, 0)
        keys = (sk.timer, sk.ready, sk.epoch, sk.stats, sk.retries, sk.autopause)
        for tick in (1000, 2000, 3000):  # three due ticks of the timer, fired in turn
            await redis.execute("ZADD", sk.timer, tick, dag_id)
            reply = await redis.script(
                "fire", keys, (*head, dag_id, tick, tick, "", "", "a", "", "")
            )
            assert reply[0] == 1
        runs = await drive_list(listing.dag_runs_page(dep, dag_id), redis)
        states = {r.dag_run_id.split(":")[1]: r.state for r in runs}
        skips = await redis.execute("ZRANGE", sk.skips(dag_id), 0, -1)
        if catchup == "none":
            assert states == {"t1": "running"}
            assert [s.rsplit(b":", 1)[0] for s in skips] == [
                f"{t}:{t}:1:max_active_runs".encode() for t in (1000, 2000, 3000)
            ]
        elif catchup == "latest":
            assert states == {
                "t1": "running",
                "1000": "skipped",
                "2000": "skipped",
                "3000": "queued",
            }
            assert {r.reason for r in runs if r.state == "skipped"} == {
                f"superseded by {dag_id}:2000",
                f"superseded by {dag_id}:3000",
            }
        else:
            assert states == {"t1": "running", "1000": "queued", "2000": "queued", "3000": "queued"}
        assert catchup != "none" or not await redis.execute("EXISTS", sk.dag_queue(dag_id))


async def test_pause_resume_delete_keep_history(node, worker, http) -> None:
    dag_id = await create_dag(http, [task("a"), task("b", "true", "a")])
    done = await finished(http, await trigger(http, dag_id))
    paused = await http.patch(f"/api/v1/dags/{dag_id}", json={"status": "paused"})
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert paused.json()["next_run_at"] is None
    resumed = (await http.patch(f"/api/v1/dags/{dag_id}", json={"status": "active"})).json()
    assert resumed["status"] == "active" and resumed["next_run_at"] is not None
    deleted = await http.delete(f"/api/v1/dags/{dag_id}")
    assert deleted.status_code == 200 and deleted.json()["status"] == "deleted"
    assert deleted.json()["next_run_at"] is None
    again = (await http.get(f"/api/v1/dags/{dag_id}")).json()
    assert again["status"] == "deleted" and again["tasks"][1]["depends_on"] == ["a"]
    runs = (await http.get(f"/api/v1/dags/{dag_id}/runs")).json()["dag_runs"]
    assert [r["dag_run_id"] for r in runs] == [done["dag_run_id"]]
    assert (await http.get(f"/api/v1/dag-runs/{done['dag_run_id']}")).json() == done
    job = (await http.get(f"/api/v1/jobs/{dag_id}.a")).json()
    assert job["status"] == "deleted" and job["dag_id"] == dag_id
    for method, path, body in [
        ("POST", f"/api/v1/dags/{dag_id}/trigger", None),
        ("PATCH", f"/api/v1/dags/{dag_id}", {"status": "active"}),
    ]:
        reply = await http.request(method, path, json=body)
        assert reply.status_code == 409, (method, path, reply.text)
    # a second DELETE changes nothing and answers as the first (a retried request)
    twice = await http.delete(f"/api/v1/dags/{dag_id}")
    assert twice.status_code == 200 and twice.json() == deleted.json()
    # lists leave deleted DAGs out unless asked
    listed = (await http.get("/api/v1/dags")).json()["dags"]
    assert dag_id not in {d["dag_id"] for d in listed}
    listed = (await http.get("/api/v1/dags", params={"include_deleted": "true"})).json()["dags"]
    assert dag_id in {d["dag_id"] for d in listed}
    for path in ("/api/v1/dags/dag_nope", "/api/v1/dag-runs/dag_nope:1", "/api/v1/dags/job_x"):
        reply = await http.get(path)
        assert reply.status_code == 404 and reply.json()["error"]["code"] == "not_found"


async def test_a_job_with_depends_on_joins_its_dependencies_dag(
    node, worker, http, redis, namespace
):
    dag_id = await create_dag(http, [task("extract"), task("transform", "true", "extract")])
    body = {"name": "load", "command": "true", "depends_on": [f"{dag_id}.transform"]}
    reply = await http.post("/api/v1/jobs", json=body)
    assert reply.status_code == 201, reply.text
    assert reply.json()["job_id"] == f"{dag_id}.load"
    job = (await http.get(f"/api/v1/jobs/{dag_id}.load")).json()
    assert job["dag_id"] == dag_id and job["depends_on"] == [f"{dag_id}.transform"]
    assert job["shard"] == (await http.get(f"/api/v1/dags/{dag_id}")).json()["shard"]
    dag = (await http.get(f"/api/v1/dags/{dag_id}")).json()
    assert [t["name"] for t in dag["tasks"]] == ["extract", "transform", "load"]
    run = await finished(http, await trigger(http, dag_id))
    load = by_task(run)["load"]["attempts"][0]
    transform = by_task(run)["transform"]["attempts"][0]
    assert load["state"] == "succeeded" and ms(load["started_at"]) >= ms(transform["finished_at"])

    before = await keyspace(redis, namespace)
    bad = [
        ({**body, "depends_on": ["job_123"]}, "$.depends_on[0]", 422),
        ({**body, "depends_on": [f"{dag_id}.ghost"]}, "$.depends_on[0]", 422),
        ({**body, "depends_on": ["dag_000000000000.a"]}, "$.depends_on[0]", 422),
        ({**body, "name": "extract"}, "$.name", 422),
        ({**body, "name": "has.dot"}, "$.name", 422),
        ({**body, "schedule": {"type": "interval", "every_s": 5}}, "$.schedule", 422),
        ({"name": "x", "command": "true"}, "$.schedule", 422),
    ]
    for payload, field, status in bad:
        reply = await http.post("/api/v1/jobs", json=payload)
        assert reply.status_code == status, (payload, reply.text)
        assert reply.json()["error"]["details"]["field"] == field, reply.text
    # a DAG's task is managed through its DAG
    for method, path, payload in [
        ("PATCH", f"/api/v1/jobs/{dag_id}.load", {"command": "false"}),
        ("DELETE", f"/api/v1/jobs/{dag_id}.load", None),
        ("POST", f"/api/v1/jobs/{dag_id}.load/trigger", None),
    ]:
        reply = await http.request(method, path, json=payload)
        assert reply.status_code == 409 and "DAG" in reply.json()["error"]["message"], reply.text
    assert (await http.get(f"/api/v1/jobs/{dag_id}")).status_code == 404
    assert await keyspace(redis, namespace) == before


async def test_a_released_task_unclaimed_past_its_sla_is_reported_stalled(node, http, redis, dep):
    """No worker runs: the root is released and nobody claims it."""
    dag_id = await create_dag(http, [task("a"), task("b", "true", "a")], stall_sla_s=0.3)
    drid = await trigger(http, dag_id)

    async def stalled() -> dict | None:
        dag = (await http.get(f"/api/v1/dags/{dag_id}")).json()
        return dag if dag["stalled_tasks"] == 1 else None

    await wait_until(stalled, timeout=10)
    run = (await http.get(f"/api/v1/dag-runs/{drid}")).json()
    tasks = by_task(run)
    assert tasks["a"]["stalled_at"] is not None and tasks["a"]["state"] == "scheduled"
    assert ms(tasks["a"]["stalled_at"]) >= ms(tasks["a"]["released_at"]) + 300
    assert tasks["b"]["stalled_at"] is None and tasks["b"]["state"] == "waiting"
    sk = dep.keys_for(dag_id)
    assert await redis.execute("HGET", sk.stats, "dag_stalled") == b"1"
    shards = (await http.get("/api/v1/cluster")).json()["shards"]
    assert shards[sk.shard]["dag_stalled"] == 1
    await rounds_later(lambda: node.maintainer.rounds, 2)  # reported once, not every round
    assert await redis.execute("HGET", sk.stats, "dag_stalled") == b"1"
