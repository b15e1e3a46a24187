"""DAGs end to end (issue #6): registration, DAG runs, release on completion, trigger rules,
upstream failure propagation, max_active_runs, the API, and the stall report."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from conftest import keyspace, wait_until

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


async def test_etl_runs_in_order(node, worker, http) -> None:
    dag_id = await create_dag(
        http,
        [
            task("extract", "sleep 0.2"),
            task("transform", "sleep 0.2", "extract"),
            task("load", "true", "transform"),
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
    # the dead-lettered task is not retried on its own: the DAG run settled on it
    rid = tasks["extract"]["run_id"]
    reply = await http.post(f"/api/v1/runs/{rid}/retry")
    assert reply.status_code == 409 and "DAG" in reply.json()["error"]["message"]


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
