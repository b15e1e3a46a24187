"""A DAG's id needs no ``dag_`` prefix, as a job's does not (issue #31): ``etl`` is stored
and answered as ``dag_etl`` (the prefix is how a run id says it is a DAG's), and every
route, the CLI and ``apply`` take either."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import cli, wait_until

DAG = {
    "name": "etl",
    "schedule": {"type": "cron", "expression": "30 2 * * *"},
    "tasks": [
        {"name": "extract", "command": "true"},
        {"name": "load", "command": "true", "depends_on": ["extract"]},
    ],
}


async def test_a_dag_id_without_its_prefix(node, worker, http, tmp_path: Path) -> None:
    made = await http.post("/api/v1/dags", json={**DAG, "id": "etl"})
    assert made.status_code == 201, made.text
    assert made.json()["dag_id"] == "dag_etl"
    assert (await http.get("/api/v1/dags/etl")).json()["dag_id"] == "dag_etl"
    assert (await http.post("/api/v1/dags", json={**DAG, "id": "dag_etl"})).status_code == 409
    put = await http.put("/api/v1/dags/etl", json={**DAG, "id": "etl"})
    assert put.status_code == 200 and put.headers["shardsched-outcome"] == "unchanged"
    mismatch = await http.put("/api/v1/dags/etl", json={**DAG, "id": "other"})
    assert mismatch.status_code == 422
    for bad in ("dag_", "-x", "a.b", "a:b", "x" * 97):
        reply = await http.post("/api/v1/dags", json={**DAG, "id": bad})
        assert reply.status_code == 422, bad

    drid = (await http.post("/api/v1/dags/etl/trigger")).json()["dag_run_id"]
    assert drid.startswith("dag_etl:")
    short = drid.removeprefix("dag_")

    async def done() -> dict | None:
        run = (await http.get(f"/api/v1/dag-runs/{short}")).json()
        return run if run["state"] == "succeeded" else None

    assert (await wait_until(done))["dag_run_id"] == drid
    assert len((await http.get("/api/v1/dags/etl/runs")).json()["dag_runs"]) == 1
    assert (await http.post(f"/api/v1/dag-runs/{short}/cancel")).status_code == 409  # ended

    api = ("--api", str(http.base_url))
    got = await cli(http, "dags", "get", "etl", *api)
    assert got.returncode == 0 and "dag_etl" in got.stdout, got.stderr
    yaml_file = tmp_path / "dag.yaml"
    yaml_file.write_text(
        "id: nightly\nname: nightly\nschedule: {type: cron, expression: '0 1 * * *'}\n"
        "tasks:\n  - {name: a, command: 'true'}\n"
    )
    added = await cli(http, "dags", "add", str(yaml_file), *api)
    assert added.returncode == 0 and "dag_nightly" in added.stdout, (added.stdout, added.stderr)
    # apply: declared as `etl`, compared with dag_etl, so the second apply changes nothing
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "etl.json").write_text(json.dumps({"kind": "dag", "id": "wf", **DAG}))
    first = await cli(http, "apply", "-f", str(conf), *api, "--json")
    assert first.returncode == 0, first.stderr
    assert [d["outcome"] for d in json.loads(first.stdout)] == ["created"]
    again = await cli(http, "apply", "-f", str(conf), *api, "--json")
    assert [(d["id"], d["outcome"]) for d in json.loads(again.stdout)] == [("dag_wf", "unchanged")]
