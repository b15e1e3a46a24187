"""DAG repair with real workers (issue #50): resume a DAG run from a dead-lettered task,
clear a task with its downstream by a previewed plan and its token, mark a task with a
note, and twenty clients clearing at once make one new attempt. Judged by the API's DAG
run and, independently, by the log each task's command appends its run id to: every
attempt runs once, and the earlier attempts stay readable."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import trio
from test_dags import by_task, create_dag, finished, trigger

from conftest import cli, wait_until
from shardsched import AsyncClient


def logged(log: Path) -> Counter[str]:
    return Counter(log.read_text().split()) if log.exists() else Counter()


def step(
    name: str, log: Path, *deps: str, fails: int = 0, then_s: float = 0, **fields: Any
) -> dict[str, Any]:
    """A task that appends its run id to ``log`` and fails its first ``fails`` executions
    (counted in a file of its own); a later one takes ``then_s`` seconds."""
    count = log.parent / f"{name}.count"
    command = f'echo "$SHARDSCHED_RUN_ID" >> {log}'
    if fails:
        command += (
            f"; n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}; "
            f"[ $n -gt {fails} ] && sleep {then_s}"
        )
    return {"name": name, "command": command, "depends_on": list(deps), **fields}


async def settled(http: httpx.AsyncClient, drid: str, state: str) -> dict:
    async def done() -> dict | None:
        run = (await http.get(f"/api/v1/dag-runs/{drid}")).json()
        return run if run["state"] == state else None

    return await wait_until(done, timeout=30)


async def test_a_dead_lettered_task_retried_resumes_its_dag_run(
    node, worker, http, tmp_path
) -> None:
    log = tmp_path / "runs.log"
    retry2 = {"max_attempts": 2, "base_s": 0, "jitter": False}
    dag_id = await create_dag(
        http,
        [
            step("extract", log),
            step("transform", log, "extract", fails=2, retry_policy=retry2),
            step("load", log, "transform"),
        ],
    )
    drid = await trigger(http, dag_id)
    run = await finished(http, drid)
    tasks = by_task(run)
    assert run["state"] == "failed" and tasks["load"]["state"] == "skipped"
    dead = tasks["transform"]["run_id"]
    assert dead.endswith(":2") and tasks["transform"]["state"] == "dead_letter"

    retried = await http.post(f"/api/v1/runs/{dead}/retry")
    assert retried.status_code == 201, retried.text
    assert retried.json()["run_id"] == dead[:-1] + "3"
    run = await settled(http, drid, "succeeded")
    tasks = by_task(run)
    assert [a["state"] for a in tasks["transform"]["attempts"]] == [
        "failed", "dead_letter", "succeeded"
    ]  # fmt: skip
    assert tasks["load"]["state"] == "succeeded" and tasks["load"]["run_id"].endswith(":2")
    again = await http.post(f"/api/v1/runs/{dead}/retry")
    assert again.status_code == 409 and "already retried" in again.json()["error"]["message"]
    dead_letter = (await http.get("/api/v1/dead-letter")).json()
    assert dead not in [r["run_id"] for r in dead_letter["runs"]]
    ran = logged(log)
    assert set(ran.values()) == {1}  # every attempt ran once
    assert sorted(ran) == sorted(
        [f"{dag_id}.extract:t1:1", *(f"{dag_id}.transform:t1:{n}" for n in (1, 2, 3)),
         f"{dag_id}.load:t1:2"]
    )  # fmt: skip
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_clear_previews_a_plan_and_applies_its_token_once(
    node, worker, http, tmp_path
) -> None:
    log = tmp_path / "runs.log"
    dag_id = await create_dag(
        http, [step("a", log), step("b", log, "a"), step("c", log, "b"), step("side", log)]
    )
    drid = await trigger(http, dag_id)
    assert (await finished(http, drid))["state"] == "succeeded"
    plan = await http.post(f"/api/v1/dag-runs/{drid}/clear", json={"task": "b", "dry_run": True})
    assert plan.status_code == 200, plan.text
    plan = plan.json()
    assert not plan["applied"] and plan["dag_run_state"] == "succeeded"
    assert [(t["task"], t["change"], t["attempt"]) for t in plan["tasks"]] == [
        ("b", "rerun", 2), ("c", "rerun", 2)
    ]  # fmt: skip
    assert plan["topology_version"] == plan["current_topology_version"] == 1
    assert plan["tasks"][0]["retries_left"] == 0  # the default policy: one attempt
    assert logged(log)[f"{dag_id}.b:t1:2"] == 0  # a dry run writes nothing

    body = {"task": "b", "token": plan["token"], "note": "bad input upstream"}
    applied = await http.post(f"/api/v1/dag-runs/{drid}/clear", json=body)
    assert applied.status_code == 200, applied.text
    assert applied.json()["applied"] and applied.json()["new_runs"] == [f"{dag_id}.b:t1:2"]
    twice = await http.post(f"/api/v1/dag-runs/{drid}/clear", json=body)
    assert twice.status_code == 409 and "not as that plan" in twice.json()["error"]["message"]
    run = await settled(http, drid, "succeeded")
    tasks = by_task(run)
    assert tasks["c"]["run_id"] == f"{dag_id}.c:t1:2" and tasks["a"]["run_id"].endswith(":1")
    assert [a["state"] for a in tasks["b"]["attempts"]] == ["succeeded", "succeeded"]
    ran = logged(log)
    assert set(ran.values()) == {1} and len(ran) == 6  # a, b, c, side, then b and c again
    changes = (await http.get(f"/api/v1/dags/{dag_id}/changes")).json()["changes"]
    (clear,) = [c for c in changes if c["action"] == "clear"]
    assert clear["by"] == "test-admin" and "bad input upstream" in clear["detail"]

    # a token applies its own plan only: not another selection's, not a mark's
    plan = (
        await http.post(f"/api/v1/dag-runs/{drid}/clear", json={"task": "c", "dry_run": True})
    ).json()
    for other in (
        ("clear", {"task": "b", "token": plan["token"]}),
        ("clear", {"task": "c", "upstream": True, "token": plan["token"]}),
        ("mark", {"task": "c", "state": "failed", "token": plan["token"]}),
    ):
        refused = await http.post(f"/api/v1/dag-runs/{drid}/{other[0]}", json=other[1])
        assert refused.status_code == 409, (other, refused.text)
    assert logged(log)[f"{dag_id}.c:t1:3"] == 0
    for bad in ({"task": "nope"}, {"task": "b", "token": "x"}, {"task": "b", "extra": 1}):
        refused = await http.post(f"/api/v1/dag-runs/{drid}/clear", json=bad)
        assert refused.status_code == 422, (bad, refused.text)
    missing = await http.post(f"/api/v1/dag-runs/{dag_id}:t99/clear", json={"task": "b"})
    assert missing.status_code == 404


async def test_mark_succeeded_releases_the_skipped_downstream(
    node, worker, http, tmp_path, redis_server, dep
) -> None:
    log = tmp_path / "runs.log"
    dag_id = await create_dag(
        http,
        [
            step("fetch", log, fails=1, retry_policy={"max_attempts": 1}),
            step("report", log, "fetch"),
        ],
    )
    drid = await trigger(http, dag_id)
    run = await finished(http, drid)
    assert run["state"] == "failed" and by_task(run)["report"]["state"] == "skipped"
    body = {"task": "fetch", "state": "succeeded", "note": "loaded by hand"}
    plan = (await http.post(f"/api/v1/dag-runs/{drid}/mark", json={**body, "dry_run": True})).json()
    states = [(t["task"], t["state"]) for t in plan["tasks"]]
    assert states == [("fetch", "failed"), ("report", "skipped")]  # as their runs say
    assert [(t["task"], t["change"]) for t in plan["tasks"]] == [
        ("fetch", "mark"), ("report", "rerun")
    ]  # fmt: skip
    async with await AsyncClient.open(redis_server.url, dep.namespace) as client:  # the SDK
        marked = await client.mark_task(
            drid, "fetch", "succeeded", note="loaded by hand", token=plan["token"]
        )
    assert marked.applied and marked.new_runs[0] == f"{dag_id}.fetch:t1:2"
    run = await settled(http, drid, "succeeded")
    fetch = by_task(run)["fetch"]
    assert fetch["run_id"] == f"{dag_id}.fetch:t1:2" and fetch["state"] == "succeeded"
    assert fetch["reason"] == "marked succeeded by sdk: loaded by hand"
    assert by_task(run)["report"]["state"] == "succeeded"
    ran = logged(log)
    assert ran == Counter({f"{dag_id}.fetch:t1:1": 1, f"{dag_id}.report:t1:2": 1})
    running = await http.post(f"/api/v1/dag-runs/{drid}/mark", json=body)
    assert running.status_code == 409  # succeeded already


async def test_twenty_clients_clearing_while_it_ends_make_one_new_attempt(
    nursery, node, worker, http, redis, dep, tmp_path
) -> None:
    """Twenty clients clear a task again and again while its first attempt is still
    running on one of two workers; it ends (failed) in the middle of the burst: exactly
    one clear applies, one new attempt runs, once."""
    from shardsched.worker.worker import Worker

    await nursery.start(Worker(redis, dep, worker_id="second-worker", concurrency=8).run)
    log = tmp_path / "runs.log"
    count = tmp_path / "flaky.count"
    flaky = (
        f'echo "$SHARDSCHED_RUN_ID" >> {log}; n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 ));'
        f" echo $n > {count}; if [ $n -eq 1 ]; then sleep 1; exit 1; fi; sleep 3"
    )  # the first attempt fails after 1 s, the next takes 3 s
    dag_id = await create_dag(
        http,
        [{"name": "flaky", "command": flaky, "retry_policy": {"max_attempts": 1}},
         step("next", log, "flaky")],
    )  # fmt: skip
    drid = await trigger(http, dag_id)

    async def running() -> bool:
        run = (await http.get(f"/api/v1/dag-runs/{drid}")).json()
        return by_task(run)["flaky"]["state"] == "running"

    await wait_until(running, timeout=20)
    answers: list[int] = []
    applied = trio.Event()

    async def client(body: dict) -> None:
        while not applied.is_set():
            code = (await http.post(f"/api/v1/dag-runs/{drid}/clear", json=body)).status_code
            answers.append(code)
            if code == 200:
                applied.set()
            else:
                await trio.sleep(0.02)  # paces one client's tries: 20 clients, ~1,000 a second

    with trio.fail_after(30):
        async with trio.open_nursery() as clients:
            for i in range(20):
                clients.start_soon(client, {"task": "flaky", "upstream": bool(i % 2)})
    assert answers.count(200) == 1 and set(answers) == {200, 409}, Counter(answers)
    assert answers.index(200) > 0  # some were refused while it ran: the race was on
    run = await settled(http, drid, "succeeded")
    assert [a["run_id"] for a in by_task(run)["flaky"]["attempts"]] == [
        f"{dag_id}.flaky:t1:1", f"{dag_id}.flaky:t1:2"
    ]  # fmt: skip
    ran = logged(log)
    assert ran == Counter({f"{dag_id}.flaky:t1:1": 1, f"{dag_id}.flaky:t1:2": 1,
                           f"{dag_id}.next:t1:2": 1})  # fmt: skip
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_the_cli_names_a_dag_by_name_and_applies_the_plan_it_shows(
    node, worker, http, tmp_path
) -> None:
    log = tmp_path / "runs.log"
    dag_id = await create_dag(
        http, [step("a", log), step("b", log, "a")], name="pipeline",
        schedule={"type": "cron", "expression": "0 3 * * *"},
    )  # fmt: skip
    dag = (await http.get(f"/api/v1/dags/{dag_id}")).json()
    assert dag["schedule_words"] == "At 03:00"  # as the CLI says it, for the console
    api = ("--api", str(http.base_url))
    out = await cli(http, "dags", "trigger", "pipeline", *api)  # a name is a handle
    assert out.returncode == 0, out.stderr
    drid = out.stdout.split()[0]
    assert drid == f"{dag_id}:t1"
    await finished(http, drid)
    dry = await cli(http, "dags", "clear", "pipeline:t1", "a", "--dry-run", *api)
    assert dry.returncode == 0, dry.stderr
    assert "plan: clear" in dry.stdout and "token: " in dry.stdout and "rerun" in dry.stdout
    assert logged(log)[f"{dag_id}.a:t1:2"] == 0
    done = await cli(http, "dags", "clear", "pipeline:t1", "a", "--note", "from the cli", *api)
    assert done.returncode == 0, done.stderr
    assert "plan: clear" in done.stderr and f"new runs: {dag_id}.a:t1:2" in done.stdout
    await settled(http, drid, "succeeded")
    mark = await cli(http, "dags", "mark", drid, "b", "failed", "--note", "bad data", *api)
    assert mark.returncode == 0, mark.stderr
    assert (await http.get(f"/api/v1/dag-runs/{drid}")).json()["state"] == "failed"
    nope = await cli(http, "dags", "mark", drid, "b", "failed", *api)
    assert nope.returncode != 0 and "failed already" in nope.stderr
    missing = await cli(http, "dags", "trigger", "no-such-dag", *api)
    assert missing.returncode != 0 and "not_found" in missing.stderr


async def test_a_dag_run_whose_version_is_gone_is_repaired_on_the_current_one(
    node, worker, http, tmp_path
) -> None:
    """Edited while none of its runs was open, a DAG keeps no old version: its ended runs
    are repaired on the current one, and the plan says so (the new command runs)."""
    log = tmp_path / "runs.log"
    old = [step("one", log), step("two", log, "one")]
    dag_id = await create_dag(http, old)
    drid = await trigger(http, dag_id)
    assert (await finished(http, drid))["state"] == "succeeded"
    new = [step("one", log), {**step("two", log, "one"), "command": f"echo v2 >> {log}"}]
    body = {"name": "d", "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
            "tasks": new}  # fmt: skip
    put = await http.put(f"/api/v1/dags/{dag_id}", json=body)
    assert put.status_code == 200, put.text
    plan = (
        await http.post(f"/api/v1/dag-runs/{drid}/clear", json={"task": "two", "dry_run": True})
    ).json()
    assert plan["topology_version"] == plan["current_topology_version"] == 2
    assert plan["ran_on_topology_version"] == 1
    done = await http.post(
        f"/api/v1/dag-runs/{drid}/clear", json={"task": "two", "token": plan["token"]}
    )
    assert done.status_code == 200, done.text
    await settled(http, drid, "succeeded")
    assert "v2" in logged(log)  # the current version's command ran
