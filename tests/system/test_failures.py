"""The failure inbox (issue #17): failed and dead-lettered runs of every job in one list,
newest first, filtered by state, time and name; counted by `status`; left with the run's
history when retention removes it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from conftest import cli, wait_until
from shardsched.core.access import Scope, TokenRequest
from shardsched.ops.access import tokens
from shardsched.store.drive import call_script, drive_async
from shardsched.store.lua import retention as lua

NOW = {"type": "once", "at": "2020-01-01T00:00:00Z"}


async def test_failed_and_dead_lettered_runs_of_every_job_newest_first(
    node, worker, http, redis, redis_server, dep
) -> None:
    async def job(name: str, command: str, **fields) -> str:
        body = {"name": name, "command": command, "schedule": NOW, **fields}
        return (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    failing = await job("a-fails", "exit 3")  # max_attempts 1: failed, never a dead letter
    dead = await job(
        "b-dies", "exit 4", retry_policy={"max_attempts": 2, "base_s": 0, "jitter": False}
    )
    fine = await job("a-fine", "true")

    async def inbox(**params) -> list[dict]:
        reply = await http.get("/api/v1/runs", params=params)
        assert reply.status_code == 200, reply.text
        return reply.json()["runs"]

    async def all_in() -> list[dict] | None:
        runs = await inbox()
        return runs if len(runs) == 3 else None

    runs = await wait_until(all_in, timeout=20)
    assert {r["job_id"] for r in runs} == {failing, dead}  # the succeeded job is not there
    states = sorted((r["job_id"], r["attempt"], r["state"]) for r in runs)
    assert states == sorted([(failing, 1, "failed"), (dead, 1, "failed"), (dead, 2, "dead_letter")])
    # as instants: "…:27Z" (a whole second) sorts after "…:27.019Z" as text, not in time
    finished = [datetime.fromisoformat(r["finished_at"]) for r in runs]
    assert finished == sorted(finished, reverse=True)
    assert fine not in {r["job_id"] for r in runs}
    assert {r["state"] for r in await inbox(state="dead_letter")} == {"dead_letter"}
    assert len(await inbox(state="failed")) == 2
    assert {r["job_id"] for r in await inbox(name_prefix="a-")} == {failing}
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert await inbox(since=future) == []
    page1 = (await http.get("/api/v1/runs", params={"limit": 2})).json()
    page2 = await inbox(limit=2, cursor=page1["next_cursor"])
    assert [r["run_id"] for r in page1["runs"] + page2] == [r["run_id"] for r in runs]
    for bad in ({"state": "succeeded"}, {"state": "failed,nope"}, {"limit": 0}, {"x": 1}):
        reply = await http.get("/api/v1/runs", params=bad)
        assert reply.status_code == 422, (bad, reply.text)

    # a team's token sees its own jobs' failures only
    request = TokenRequest(name="team-b", scopes=[Scope.READ], prefixes=["b-"])
    secret = (await drive_async(tokens.create_token(dep, request, "tests"), redis)).token
    team = await http.get("/api/v1/runs", headers={"authorization": f"Bearer {secret}"})
    assert {r["job_id"] for r in team.json()["runs"]} == {dead}

    # status counts them; the CLI lists them
    status = (await http.get("/api/v1/status")).json()
    assert status["failed_1h"] == 3 and status["dead_letter"] == 1
    out = await cli(http, "runs", "failed", "--since", "1h", "--api", str(http.base_url))
    assert out.returncode == 0, out.stderr
    assert all(r["run_id"] in out.stdout for r in runs)
    out = await cli(http, "status", "--redis", redis_server.url, "--namespace", dep.namespace)
    assert "failed runs (1 h) 3" in out.stdout, out.stdout + out.stderr

    # retention removing a run takes it out of the inbox too
    rid = f"{failing}:" + next(r for r in runs if r["job_id"] == failing)["run_id"].split(":", 1)[1]
    sk = dep.keys_for(failing)
    finished = int(await redis.execute("HGET", sk.run(rid), "f"))
    epoch = int(await redis.execute("GET", sk.epoch))
    await call_script(redis, lua.expire_history(sk, epoch, [lua.Expiring.run(rid, finished)]))
    assert rid not in {r["run_id"] for r in await inbox()}
    assert await redis.execute("ZSCORE", sk.failures, rid) is None


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_status_and_audit_read_through_the_api_or_redis(
    node, worker, http, redis_server, dep
) -> None:
    """The same flags wherever both make sense: --api (the default) or --redis."""
    api = ("--api", str(http.base_url))
    body = {"name": "s", "command": "true", "schedule": NOW}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def ran() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return bool(runs) and runs[0]["state"] == "succeeded"

    await wait_until(ran, timeout=20)
    direct = ("--redis", redis_server.url, "--namespace", dep.namespace)
    via_api = await cli(http, "status", *api, "--json")
    via_redis = await cli(http, "status", *direct, "--json")
    assert via_api.returncode == via_redis.returncode, (via_api.stderr, via_redis.stderr)
    a, b = json.loads(via_api.stdout), json.loads(via_redis.stdout)
    assert a["shards"] == b["shards"] and a["failed_1h"] == b["failed_1h"]
    report = await cli(http, "audit", *api, "--json", "--settle", "0")
    direct_report = await cli(http, "audit", *direct, "--json", "--settle", "0")
    assert report.returncode == direct_report.returncode == 0, report.stdout + report.stderr
    ra, rb = json.loads(report.stdout), json.loads(direct_report.stdout)
    assert ra["fired"] == rb["fired"] >= 1 and ra["missing"] == rb["missing"] == 0
    text = await cli(http, "audit", *api)
    assert "OK" in text.stdout
    as_yaml = await cli(http, "audit", *api, "-o", "yaml", "--settle", "0")
    assert yaml.safe_load(as_yaml.stdout)["fired"] == ra["fired"]
    status_yaml = yaml.safe_load((await cli(http, "status", *api, "-o", "yaml")).stdout)
    assert len(status_yaml["shards"]) == dep.n_shards
    wide = await cli(http, "status", *api, "-o", "wide")
    assert wide.stdout.count("\nSHARD ") == 1  # every shard, folded
    unreachable = await cli(http, "status", "--api", "http://127.0.0.1:1")
    assert unreachable.returncode == 2 and "cannot reach the API" in unreachable.stderr
