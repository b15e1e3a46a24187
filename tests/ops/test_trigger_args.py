"""Parameters of a run (#30): a job's ``args`` reach a handler's ``ctx.args`` and a
command's ``SHARDSCHED_ARGS``; a manual trigger's args replace them for its run and are
recorded on it (and kept by its retries); a DAG run's args reach every task; an
idempotency key makes a repeated trigger one run; a thousand triggers without a key in one
round trip are a thousand runs. Checked with real workers and what the jobs write."""

from __future__ import annotations

import json

import httpx

from conftest import cli, keyspace, wait_until
from shardsched.core.errors import ValidationError
from shardsched.core.params import ARGS_MAX_BYTES
from shardsched.store.drive import call_script, redis_calls
from shardsched.store.lua import jobs as jobs_lua
from shardsched.worker.handlers import HandlerContext, handler

FAR = {"type": "once", "at": "2100-01-01T00:00:00Z"}
SEEN: dict[str, object] = {}


@handler("test-args")
def _record_args(ctx: HandlerContext) -> None:
    SEEN[ctx.run_id] = ctx.args


async def create(http: httpx.AsyncClient, command: str, **fields: object) -> str:
    body = {"name": "p", "command": command, "schedule": FAR, **fields}
    reply = await http.post("/api/v1/jobs", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def ended(http: httpx.AsyncClient, run_id: str) -> dict:
    async def done() -> dict | None:
        run = (await http.get(f"/api/v1/runs/{run_id}")).json()
        return run if run["state"] in ("succeeded", "dead_letter") else None

    return await wait_until(done, timeout=20)


async def trigger(http: httpx.AsyncClient, job_id: str, **body: object) -> httpx.Response:
    return await http.post(f"/api/v1/jobs/{job_id}/trigger", json=body or None)


async def test_a_handler_gets_the_jobs_args_or_the_triggers(node, worker, http) -> None:
    job_id = await create(http, "handler:test-args", args={"region": "eu", "n": [1, 2]})
    plain = (await trigger(http, job_id)).json()["run_id"]
    given = await trigger(http, job_id, args={"region": "us"})
    assert given.status_code == 201, given.text
    override = given.json()["run_id"]
    for rid in (plain, override):
        assert (await ended(http, rid))["state"] == "succeeded"
    assert SEEN[plain] == {"region": "eu", "n": [1, 2]}
    assert SEEN[override] == {"region": "us"}  # the trigger's replace the job's whole
    runs = {rid: (await http.get(f"/api/v1/runs/{rid}")).json() for rid in (plain, override)}
    assert runs[plain]["args"] is None and runs[override]["args"] == {"region": "us"}
    # the definition shows them, and a change of anything else keeps them
    job = (await http.get(f"/api/v1/jobs/{job_id}")).json()
    assert job["args"] == {"region": "eu", "n": [1, 2]}
    patched = await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    assert patched.json()["args"] == {"region": "eu", "n": [1, 2]}, patched.text
    changed = await http.patch(f"/api/v1/jobs/{job_id}", json={"args": {"region": "ap"}})
    assert changed.json()["args"] == {"region": "ap"}
    assert changed.json()["version"] > job["version"]
    versions = (await http.get(f"/api/v1/jobs/{job_id}/versions")).text
    assert '"region":"eu"' in versions and '"region":"ap"' in versions, versions


async def test_a_command_gets_its_args_as_json_and_its_retries_keep_them(
    node, worker, http, tmp_path
) -> None:
    out, once = tmp_path / "args.log", tmp_path / "failed-once"
    command = (
        f'echo "$SHARDSCHED_ATTEMPT $SHARDSCHED_ARGS $GREETING" >> {out}; '
        f"test -e {once} || {{ touch {once}; exit 3; }}"
    )
    retry = {"max_attempts": 2, "base_s": 0.1, "max_s": 0.1, "jitter": False}
    job_id = await create(http, command, env={"GREETING": "hi"}, retry_policy=retry)
    first = (await trigger(http, job_id, args={"day": "2026-12-01"})).json()["run_id"]
    second = first[: -len(":1")] + ":2"

    async def retried() -> dict | None:
        reply = await http.get(f"/api/v1/runs/{second}")
        return reply.json() if reply.status_code == 200 else None

    await wait_until(retried, timeout=20)
    assert (await ended(http, second))["state"] == "succeeded"
    lines = out.read_text().splitlines()
    assert lines == ['1 {"day":"2026-12-01"} hi', '2 {"day":"2026-12-01"} hi'], lines
    assert (await http.get(f"/api/v1/runs/{second}")).json()["args"] == {"day": "2026-12-01"}


async def test_a_dag_runs_args_reach_every_task(node, worker, http, tmp_path) -> None:
    out = tmp_path / "tasks.log"
    echo = f'echo "$SHARDSCHED_ARGS" >> {out}'
    body = {
        "name": "etl",
        "schedule": FAR,
        "tasks": [
            {"name": "a", "command": echo},
            {"name": "b", "command": echo, "depends_on": ["a"]},
        ],
    }
    dag_id = (await http.post("/api/v1/dags", json=body)).json()["dag_id"]
    reply = await http.post(f"/api/v1/dags/{dag_id}/trigger", json={"args": {"day": "mon"}})
    assert reply.status_code == 201, reply.text
    drid = reply.json()["dag_run_id"]

    async def done() -> bool:
        return (await http.get(f"/api/v1/dag-runs/{drid}")).json()["state"] == "succeeded"

    await wait_until(done, timeout=20)
    assert out.read_text().splitlines() == ['{"day":"mon"}', '{"day":"mon"}']


async def test_an_idempotency_key_makes_a_repeated_trigger_one_run(node, http, redis, dep) -> None:
    job_id = await create(http, "true")
    other = await create(http, "true")
    first = await trigger(http, job_id, idempotency_key="deploy-4711")
    again = await trigger(http, job_id, idempotency_key="deploy-4711")
    assert (first.status_code, again.status_code) == (201, 200)
    # the same key with other args is not the same request: said, not answered as one
    other_args = await trigger(http, job_id, idempotency_key="deploy-4711", args={"x": 1})
    assert other_args.status_code == 409, other_args.text
    assert again.json()["run_id"] == first.json()["run_id"] and again.json()["repeated"]
    assert "repeated" not in first.json()
    assert again.json()["scheduled_for"] == first.json()["scheduled_for"]
    fresh = await trigger(http, job_id, idempotency_key="deploy-4712")
    elsewhere = await trigger(http, other, idempotency_key="deploy-4711")  # per job
    ids = {r.json()["run_id"] for r in (first, fresh, elsewhere)}
    assert len(ids) == 3 and {fresh.status_code, elsewhere.status_code} == {201}
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
    assert len(runs) == 2
    ttl = await redis.execute("PTTL", dep.keys_for(job_id).idempotency(job_id, "deploy-4711"))
    assert 23 * 3600 * 1000 < ttl <= 24 * 3600 * 1000


async def test_a_thousand_triggers_in_one_round_trip_are_a_thousand_runs(
    node, http, redis, dep
) -> None:
    job_id = await create(http, "true", schedule={"type": "interval", "every_s": 0.1})
    sk = dep.keys_for(job_id)
    calls = [jobs_lua.trigger(sk, job_id, "test") for _ in range(1000)]
    replies = await redis_calls(redis, calls)  # one pipeline: the same millisecond or two
    run_ids = [r[1].decode() for r in replies]
    assert all(r[0] == jobs_lua.JobReply.OK for r in replies)
    assert len(set(run_ids)) == 1000
    assert len({r[2] for r in replies}) < 100, "they came within a few milliseconds"
    # the scheduled ticks fired meanwhile are runs of their own, none replaced
    await redis.execute("HSET", sk.job(job_id), "status", "paused")
    everything = await redis.execute("ZRANGE", sk.runs_of(job_id), 0, -1)
    assert set(run_ids) <= {rid.decode() for rid in everything}
    states = await redis.pipeline([("HGET", sk.run(rid), "st") for rid in run_ids])
    assert set(states) <= {b"scheduled", b"running", b"succeeded"}


async def test_bad_args_and_keys_are_422_and_write_nothing(node, http, redis, dep) -> None:
    job_id = await create(http, "true")
    before = await keyspace(redis, dep.namespace)
    big = {"blob": "x" * ARGS_MAX_BYTES}
    for body, field in [
        ({"args": big}, "$.args"),
        ({"args": [1, 2]}, "$.args"),
        ({"idempotency_key": "has space"}, "$.idempotency_key"),
        ({"idempotency_key": ""}, "$.idempotency_key"),
        ({"idempotency_key": "k" * 201}, "$.idempotency_key"),
        ({"when": "now"}, "$.when"),
    ]:
        reply = await http.post(f"/api/v1/jobs/{job_id}/trigger", json=body)
        assert reply.status_code == 422, (body, reply.text)
        assert reply.json()["error"]["details"]["field"] == field, reply.text
    created = await http.post(
        "/api/v1/jobs", json={"name": "b", "command": "true", "schedule": FAR, "args": big}
    )
    assert created.status_code == 422 and "$.args" in created.text
    assert await keyspace(redis, dep.namespace) == before


async def test_the_cli_and_sdk_pass_args_and_keys(node, http, redis, dep) -> None:
    job_id = await create(http, "true")
    api = ("--api", str(http.base_url))
    flags = ("--args", '{"a": 1}', "--idempotency-key", "cli-1")
    one = await cli(http, *api, "jobs", "trigger", job_id, *flags)
    two = await cli(http, *api, "jobs", "trigger", job_id, *flags)
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert one.stdout.strip() == two.stdout.strip() != ""
    assert "the key's first run" in two.stderr and "first run" not in one.stderr
    shown = await cli(http, *api, "runs", "get", one.stdout.strip())
    assert shown.returncode == 0 and 'args {"a":1}' in shown.stdout, shown.stdout
    run = (await http.get(f"/api/v1/runs/{one.stdout.strip()}")).json()
    assert run["args"] == {"a": 1}
    bad = await cli(http, *api, "jobs", "trigger", job_id, "--args", "[1")
    assert bad.returncode != 0 and "--args" in bad.stderr and "not JSON" in bad.stderr
    # the SDK validates before it sends anything
    from shardsched.sdk.plans import jobs

    try:
        jobs.trigger_request(idempotency_key="a b")
    except ValidationError as exc:
        assert exc.field == "$.idempotency_key"
    else:
        raise AssertionError("a bad key passed the SDK")
    assert json.loads(json.dumps(run["args"])) == {"a": 1}
    assert await call_script(redis, jobs_lua.trigger(dep.keys_for(job_id), job_id, "t")) != []
