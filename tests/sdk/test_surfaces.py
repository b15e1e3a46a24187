"""The SDK (redis-py, same scripts) and the CLI (HTTP) over DAGs, jobs, runs and dead letters."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import trio

from conftest import cli, keyspace, wait_until
from shardsched import Client, DagNotFound, DagSpec, OnceSchedule, TaskSpec

FAR = OnceSchedule(at=datetime(2099, 1, 1, tzinfo=UTC))


async def test_sdk_dags(node, worker, redis_server, redis, dep) -> None:
    client = await trio.to_thread.run_sync(Client, redis_server.url, dep.namespace)
    try:
        spec = DagSpec(
            name="etl",
            schedule=FAR,
            tasks=[
                TaskSpec(name="extract", command="true"),
                TaskSpec(name="load", command="true", depends_on=["extract"]),
            ],
        )
        created = await trio.to_thread.run_sync(client.add_dag, spec)
        dag = await trio.to_thread.run_sync(client.get_dag, created.dag_id)
        assert dag.name == "etl" and dag.task_job_ids["load"] == f"{created.dag_id}.load"
        listed = (await trio.to_thread.run_sync(client.list_dags)).dags
        assert created.dag_id in [d.dag_id for d in listed]
        triggered = await trio.to_thread.run_sync(client.trigger_dag, created.dag_id)

        async def done():
            run = await trio.to_thread.run_sync(client.get_dag_run, triggered.dag_run_id)
            return run if run.state == "succeeded" else None

        run = await wait_until(done)
        assert [t.state for t in run.tasks] == ["succeeded", "succeeded"]
        runs = (await trio.to_thread.run_sync(client.list_dag_runs, created.dag_id)).dag_runs
        assert [r.dag_run_id for r in runs] == [triggered.dag_run_id]
        assert (await trio.to_thread.run_sync(client.pause_dag, created.dag_id)).status == "paused"
        assert (await trio.to_thread.run_sync(client.resume_dag, created.dag_id)).status == "active"
        assert (
            await trio.to_thread.run_sync(client.delete_dag, created.dag_id)
        ).status == "deleted"

        before = await keyspace(redis, dep.namespace)
        cyclic = msgspec.structs.replace(
            spec,
            tasks=[
                TaskSpec(name="extract", command="true", depends_on=["load"]),
                TaskSpec(name="load", command="true", depends_on=["extract"]),
            ],
        )
        with pytest.raises(msgspec.ValidationError, match="extract -> load -> extract"):
            await trio.to_thread.run_sync(client.add_dag, cyclic)
        with pytest.raises(DagNotFound):
            await trio.to_thread.run_sync(client.get_dag, "dag_000000000000")
        assert await keyspace(redis, dep.namespace) == before
    finally:
        client.close()


async def test_cli_dags(node, worker, http, tmp_path: Path) -> None:
    api = ("--api", str(http.base_url))
    body = {
        "name": "cli-etl",
        "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
        "tasks": [
            {"name": "extract", "command": "true"},
            {"name": "load", "command": "true", "depends_on": ["extract"]},
        ],
    }
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(body))
    out = await cli(http, "dags", "add", str(path), *api, "--json")
    assert out.returncode == 0, out.stderr
    dag_id = json.loads(out.stdout)["dag_id"]
    out = await cli(http, "dags", "add", "-", *api, stdin=json.dumps(body))
    assert out.returncode == 0 and out.stdout.startswith("DAG_ID"), out
    out = await cli(http, "dags", "list", *api)
    assert out.returncode == 0 and dag_id in out.stdout and "cli-etl" in out.stdout
    out = await cli(http, "dags", "get", dag_id, *api)
    assert out.returncode == 0 and f"{dag_id}.load" in out.stdout and "extract" in out.stdout
    out = await cli(http, "dags", "trigger", dag_id, *api, "--json")
    drid = json.loads(out.stdout)["dag_run_id"]

    async def done() -> str | None:
        shown = await cli(http, "dags", "run", drid, *api)
        return shown.stdout if shown.stdout.split("\n")[1].split()[1] == "succeeded" else None

    shown = await wait_until(done, timeout=20)
    assert "extract" in shown and "load" in shown
    out = await cli(http, "dags", "runs", dag_id, *api)
    assert drid in out.stdout and "load:succeeded" in out.stdout
    for verb, status in (("pause", "paused"), ("resume", "active"), ("delete", "deleted")):
        out = await cli(http, "dags", verb, dag_id, *api)
        assert out.returncode == 0 and out.stdout.split() == [dag_id, status], out

    # YAML, as apply and edit take it (a DAG id needs no prefix when the server makes it)
    import yaml

    as_yaml = tmp_path / "etl.yaml"
    as_yaml.write_text(yaml.safe_dump({**body, "name": "etl-from-yaml"}))
    out = await cli(http, "dags", "add", str(as_yaml), *api, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["dag_id"].startswith("dag_")

    body["tasks"][1]["depends_on"] = ["ghost"]
    for args, stdin, needle in [
        (("dags", "add", "-"), json.dumps(body), "unknown dependency 'ghost' (at $.tasks[1]"),
        (("dags", "add", "-"), "{not json", "is neither JSON"),
        (("dags", "add", "-"), "- a list", "expected a JSON or YAML mapping"),
        (("dags", "add", str(tmp_path / "missing.json")), None, "cannot read"),
        (("dags", "get", "dag_000000000000"), None, "not_found: DAG 'dag_000000000000'"),
        (("dags", "trigger", dag_id), None, "conflict:"),
    ]:
        out = await cli(http, *args, *api, stdin=stdin)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, out.stderr)
    out = await cli(http, "dags", "list", "--api", "http://127.0.0.1:9")
    assert out.returncode == 1 and "cannot reach the API" in out.stderr


async def test_cli_jobs_runs_dead_letter(node, worker, http, tmp_path: Path) -> None:
    api = ("--api", str(http.base_url))
    body = {
        "name": "cli-job",
        "schedule": {"type": "interval", "every_s": 3600},
        "command": "echo out; exit 2",
        "retry_policy": {"max_attempts": 2, "base_s": 0.1, "max_s": 0.1, "jitter": False},
    }
    out = await cli(http, "jobs", "add", "-", *api, "--json", stdin=json.dumps(body))
    assert out.returncode == 0, out.stderr
    job_id = json.loads(out.stdout)["job_id"]
    listed = json.loads((await cli(http, "jobs", "list", *api, "--json", "--limit", "1")).stdout)
    assert [j["job_id"] for j in listed["jobs"]] == [job_id]
    run_id = (await cli(http, "jobs", "trigger", job_id, *api)).stdout.strip()
    assert run_id.startswith(f"{job_id}:t1:")

    async def dead() -> str | None:
        shown = await cli(http, "dead-letter", *api)
        return shown.stdout if job_id in shown.stdout else None

    shown = await wait_until(dead, timeout=20)
    assert "dead_letter" in shown and f"{job_id}:t1:2" in shown
    assert (await cli(http, "runs", "output", f"{job_id}:t1:2", *api)).stdout == "out\n"
    runs = json.loads((await cli(http, "runs", "list", job_id, *api, "--json")).stdout)["runs"]
    assert [r["state"] for r in runs] == ["dead_letter", "failed"]
    out = await cli(http, "runs", "retry", f"{job_id}:t1:2", *api)
    assert out.returncode == 0 and f"{job_id}:t1:3" in out.stdout
    out = await cli(
        http,
        "jobs",
        "backfill",
        job_id,
        *api,
        "--start",
        "2026-01-01T00:00:00Z",
        "--end",
        "2026-01-01T00:00:00Z",
    )
    assert out.returncode == 0 and out.stdout.startswith("0 ticks"), out
    for args, needle in [
        (("jobs", "get", "job_000000000000"), "not_found: job 'job_000000000000' not found"),
        (("runs", "get", "nope:1:1"), "not_found:"),
        (("runs", "list", job_id, "--state", "done"), "validation_error:"),
        (("jobs", "pause", job_id, "--until", "soon"), "(at $.paused_until)"),
        (("runs", "retry", run_id), "already_retried:"),
    ]:
        out = await cli(http, *args, *api)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, out.stderr)
    out = await cli(http, "jobs", "list", "--status", "sleepy", *api)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
