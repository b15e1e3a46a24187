"""A job's name as a handle (issue #31): the shards' index of names, a unique name when
asked for (race-free), the CLI taking a name in an id's place, and the owner indexing
jobs made before the index existed."""

from __future__ import annotations

import pytest
import trio

from conftest import cli, wait_until
from shardsched import AsyncClient
from shardsched.core.errors import NameTaken
from shardsched.core.models import CronSchedule, JobSpec

HOURLY = {"type": "cron", "expression": "0 * * * *"}


def body(name: str, **more) -> dict:
    return {"name": name, "command": "true", "schedule": HOURLY, **more}


async def named(http, name: str, **params) -> list[str]:
    reply = await http.get("/api/v1/jobs", params={"name": name, **params})
    assert reply.status_code == 200, reply.text
    return [j["job_id"] for j in reply.json()["jobs"]]


async def test_unique_names_and_the_index_through_rename_and_delete(node, http, redis, dep):
    first = (await http.post("/api/v1/jobs?unique_name=true", json=body("hello"))).json()
    taken = await http.post("/api/v1/jobs?unique_name=true", json=body("hello"))
    assert taken.status_code == 409
    message = taken.json()["error"]["message"]
    assert first["job_id"] in message and "allow-duplicate-name" in message
    assert await named(http, "hello") == [first["job_id"]]
    # without unique_name a duplicate is allowed (it was asked for)
    second = (await http.post("/api/v1/jobs", json=body("hello"))).json()
    assert sorted(await named(http, "hello")) == sorted([first["job_id"], second["job_id"]])
    assert await named(http, "hello", status="paused") == []
    # a rename moves it in the index
    renamed = await http.patch(f"/api/v1/jobs/{second['job_id']}", json={"name": "bye"})
    assert renamed.status_code == 200
    assert await named(http, "hello") == [first["job_id"]]
    assert await named(http, "bye") == [second["job_id"]]
    # a delete takes it out; the name is free again for a unique creation
    await http.delete(f"/api/v1/jobs/{first['job_id']}")
    assert await named(http, "hello") == []
    assert await named(http, "hello", include_deleted="true") == []
    third = await http.post("/api/v1/jobs?unique_name=true", json=body("hello"))
    assert third.status_code == 201
    # a name shared by many jobs of one shard: a set, folded back when one is left
    many = [
        (await http.post("/api/v1/jobs", json=body("dup", id=f"dup-{i}"))).json()["job_id"]
        for i in range(40)
    ]
    assert sorted(await named(http, "dup", limit=100)) == sorted(many)
    for job_id in many[1:]:
        await http.delete(f"/api/v1/jobs/{job_id}")
    assert await named(http, "dup") == [many[0]]
    sk = dep.keys_for(many[0])
    assert await redis.execute("HGET", sk.names("dup"), "dup") == many[0].encode()
    for s in range(dep.n_shards):
        assert await redis.execute("EXISTS", dep.shard(s).named("dup")) == 0


async def test_a_unique_name_wins_once_among_creations_at_once(node, http) -> None:
    codes: list[int] = []

    async def create() -> None:
        reply = await http.post("/api/v1/jobs?unique_name=true", json=body("race"))
        codes.append(reply.status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(create)
    assert sorted(codes) == [201] + [409] * 19
    assert len(await named(http, "race")) == 1


async def test_the_owner_indexes_jobs_made_before_the_index(node, http, redis, dep) -> None:
    ids = [
        (await http.post("/api/v1/jobs", json=body(f"old-{i}"))).json()["job_id"] for i in range(30)
    ]
    gone = (await http.post("/api/v1/jobs", json=body("old-gone"))).json()["job_id"]
    await http.delete(f"/api/v1/jobs/{gone}")
    # as a deployment of a version before the index: no names, no marker
    for s in range(dep.n_shards):
        sk = dep.shard(s)
        buckets = await redis.execute("KEYS", sk.base + "names:*")
        await redis.execute("DEL", sk.names_indexed, *buckets)
    node.maintainer.names_indexed.clear()
    assert await named(http, "old-7") == []

    async def indexed() -> bool:
        marks = [
            await redis.execute("GET", dep.shard(s).names_indexed) for s in range(dep.n_shards)
        ]
        return all(mark == b"done" for mark in marks)

    await wait_until(indexed, timeout=15)
    for i, job_id in enumerate(ids):
        assert await named(http, f"old-{i}") == [job_id]
    assert await named(http, "old-gone") == []


async def test_the_cli_takes_a_name_where_an_id_goes(node, http) -> None:
    api = ("--api", str(http.base_url))
    made = await cli(
        http, "jobs", "create", "nightly", "--cron", "@daily", "--command", "true", *api
    )
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.split()[0]
    again = await cli(
        http, "jobs", "create", "nightly", "--cron", "@daily", "--command", "true", *api
    )
    assert (
        again.returncode == 1
        and job_id in again.stderr
        and "--allow-duplicate-name" in again.stderr
    )
    got = await cli(http, "jobs", "get", "nightly", *api, "--json")
    assert got.returncode == 0, got.stderr
    assert '"job_id": "' + job_id in got.stdout.replace('":"', '": "')
    paused = await cli(http, "jobs", "pause", "nightly", "--reason", "db move", *api)
    assert paused.returncode == 0 and f"{job_id}  paused" in paused.stdout
    runs = await cli(http, "runs", "list", "nightly", *api)
    assert runs.returncode == 0, runs.stderr
    twin = await cli(
        http, "jobs", "create", "nightly", "--cron", "@daily", "--command", "true",
        "--allow-duplicate-name", *api,
    )  # fmt: skip
    assert twin.returncode == 0, twin.stderr
    ambiguous = await cli(http, "jobs", "get", "nightly", *api)
    assert ambiguous.returncode == 1 and "2 jobs are named 'nightly'" in ambiguous.stderr
    missing = await cli(http, "jobs", "get", "nobody-by-that-name", *api)
    assert missing.returncode == 1 and "not_found" in missing.stderr


async def test_the_sdk_finds_by_name_restores_and_refuses_a_taken_name(node, redis_server, dep):
    spec = JobSpec(name="sdk-named", schedule=CronSchedule(expression="0 * * * *"), command="true")
    async with await AsyncClient.open(redis_server.url, dep.namespace) as client:
        made = await client.add_job(spec, unique_name=True)
        with pytest.raises(NameTaken) as taken:
            await client.add_job(spec, unique_name=True)
        assert taken.value.job_ids == [made.job_id]
        assert [j.job_id for j in await client.jobs_named("sdk-named")] == [made.job_id]
        await client.delete_job(made.job_id)
        assert await client.jobs_named("sdk-named") == []
        back = await client.restore_job(made.job_id)
        assert back.incarnation == 2 and back.status == "active"
        assert [j.job_id for j in await client.jobs_named("sdk-named")] == [made.job_id]
