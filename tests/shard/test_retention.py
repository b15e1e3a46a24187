"""Retention: finished runs leave Redis for the cold archive (archived first, removed
second), and every reader (runs pages, a run, its output, the audit, /ticks, backfill)
still answers one whole history, marked ``archived: true`` where it came from the archive.
Checked against an independent record: each job appends its own run id to a file."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from conftest import TEST_SHARDS, admin_token, wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule, JobSpec, RunState
from shardsched.ops.history.audit import audit
from shardsched.router.app import create_app
from shardsched.sdk import Client
from shardsched.service import serve_http
from shardsched.shard.retention import Retainer
from shardsched.store.archive import open_archive
from shardsched.store.drive import call_script, drive_async
from shardsched.store.lua import retention as lua
from shardsched.store.redis import Redis
from shardsched.store.retention import RetentionDefaults, retention_slice


async def open_with_archive(redis: Redis, namespace: str, root: Path | str) -> ops.Deployment:
    url = root if isinstance(root, str) else f"file://{root}"
    return await drive_async(ops.open_deployment(namespace, TEST_SHARDS, url), redis)


async def api(nursery: trio.Nursery, redis: Redis, dep: ops.Deployment) -> httpx.AsyncClient:
    binds = await nursery.start(serve_http, create_app(redis, dep), "127.0.0.1:0")
    headers = {"authorization": f"Bearer {await admin_token(redis, dep)}"}
    return httpx.AsyncClient(base_url=binds[0], timeout=10, headers=headers)


async def all_runs(http: httpx.AsyncClient, job_id: str, limit: int) -> list[dict]:
    out, cursor = [], None
    while True:
        params: dict = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        page = (await http.get(f"/api/v1/jobs/{job_id}/runs", params=params)).json()
        out += page["runs"]
        cursor = page["next_cursor"]
        if cursor is None:
            return out


async def start_retainer(
    nursery: trio.Nursery, redis: Redis, dep: ops.Deployment, url: str
) -> Retainer:
    """The owner's retention task over every shard (the node fixture holds them all), with
    no deployment-wide age: only the jobs' own rules apply. Passes every 0.1 s."""
    epochs = {s: int(await redis.execute("GET", dep.shard(s).epoch)) for s in range(TEST_SHARDS)}
    retainer = Retainer(
        redis, dep, open_archive(url), RetentionDefaults(max_age_s=None), epochs, pause_s=0.01,
        every_s=0.1,
    )  # fmt: skip
    nursery.start_soon(retainer.run)
    return retainer


def recorder(path: Path) -> str:
    return f'echo "$SHARDSCHED_RUN_ID" >> {path}; echo "output of $SHARDSCHED_RUN_ID"'


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_old_runs_move_to_the_archive_and_every_reader_still_sees_them(
    nursery: trio.Nursery,
    redis: Redis,
    redis_server,
    namespace: str,
    node,
    worker,
    tmp_path: Path,
) -> None:
    dep = await open_with_archive(redis, namespace, tmp_path / "archive")
    http = await api(nursery, redis, dep)
    record = tmp_path / "ran.txt"
    spec = {
        "name": "kept-three",
        "command": recorder(record),
        "schedule": {"type": "interval", "every_s": 0.5},
        "retention": {"max_runs": 3},
    }
    created = await http.post("/api/v1/jobs", json=spec)
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    assert (await http.get(f"/api/v1/jobs/{job_id}")).json()["retention"] == {"max_runs": 3}
    for bad in ({"max_runs": 0}, {"max_age_s": -1}, {"keep": 3}, 7):  # refused, nothing changes
        refused = await http.patch(f"/api/v1/jobs/{job_id}", json={"retention": bad})
        assert refused.status_code == 422, refused.text
    assert (await http.get(f"/api/v1/jobs/{job_id}")).json()["version"] == 1
    sk = dep.keys_for(job_id)

    async def ran(n: int) -> bool:
        return record.exists() and len(record.read_text().split()) >= n

    await wait_until(lambda: ran(10), timeout=30)
    retainer = await start_retainer(nursery, redis, dep, f"file://{tmp_path / 'archive'}")

    async def moved() -> bool:
        return retainer.archived >= 7

    await wait_until(moved, timeout=20)
    patch = {"status": "paused"}
    assert (await http.patch(f"/api/v1/jobs/{job_id}", json=patch)).status_code == 200

    async def settled() -> bool:  # nothing in flight, and retention caught up
        states = {
            r["state"] for r in (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        }
        return states <= {"succeeded"} and await redis.execute("ZCARD", sk.runs_of(job_id)) <= 3

    await wait_until(settled, timeout=20)
    ran_ids = record.read_text().split()
    hot = [r.decode() for r in await redis.execute("ZRANGE", sk.runs_of(job_id), 0, -1)]
    assert len(hot) == 3 and set(hot) <= set(ran_ids)
    for rid in set(ran_ids) - set(hot):  # the record and the output left Redis
        assert not await redis.execute("EXISTS", sk.run(rid), sk.output(rid))

    # one history: pages of 2 and of 1000 give every run once, newest first
    for limit in (2, 1000):
        runs = await all_runs(http, job_id, limit)
        ids = [r["run_id"] for r in runs]
        assert sorted(ids) == sorted(ran_ids), limit
        assert [r["scheduled_for"] for r in runs] == sorted(
            (r["scheduled_for"] for r in runs), reverse=True
        )
        assert {r["run_id"] for r in runs if r["archived"]} == set(ran_ids) - set(hot)
    old = sorted(set(ran_ids) - set(hot))[0]
    got = (await http.get(f"/api/v1/runs/{old}")).json()
    assert got["archived"] is True and got["state"] == "succeeded" and got["job_id"] == job_id
    out = (await http.get(f"/api/v1/runs/{old}/output")).json()
    assert out["output"] == f"output of {old}\n"
    assert (await http.get(f"/api/v1/runs/{hot[0]}")).json()["archived"] is False

    # the SDK reads the same history (it finds the archive in the deployment's meta)
    def sdk_reads() -> tuple:
        with Client(redis_server.url, namespace) as client:
            return client.get_run(old), client.list_runs(job_id, limit=1000), client.get_output(old)

    sdk_run, sdk_page, sdk_out = await trio.to_thread.run_sync(sdk_reads)
    assert sdk_run.archived and sdk_out.output == out["output"]
    assert sorted(r.run_id for r in sdk_page.runs) == sorted(ran_ids)
    # a state filter reads the archive too
    query = {"state": "succeeded", "limit": 1000}
    only = await http.get(f"/api/v1/jobs/{job_id}/runs", params=query)
    assert sorted(r["run_id"] for r in only.json()["runs"]) == sorted(ran_ids)
    query["state"] = "failed"
    assert (await http.get(f"/api/v1/jobs/{job_id}/runs", params=query)).json()["runs"] == []

    # the audit and /ticks count archived ticks as fired
    report = await drive_async(audit(dep, settle_s=0), redis)
    assert report.missing == 0 and report.duplicated == 0, report
    assert report.fired == len(ran_ids)
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks", params={"limit": 1000})).json()
    outcomes = [t["outcome"] for t in ticks["ticks"]]
    assert outcomes.count("fired") == len(ran_ids) and "missing" not in outcomes

    # a backfill over the window does not run an archived tick again
    first = min(r["scheduled_for"] for r in await all_runs(http, job_id, 1000))
    body = {"start": first, "end": got["scheduled_for"]}
    backfilled = (await http.post(f"/api/v1/jobs/{job_id}/backfill", json=body)).json()
    assert backfilled["queued"] == 0 and backfilled["already"] == backfilled["ticks"] >= 1
    await http.aclose()


@pytest.mark.parametrize("where", ["local", "s3"])
async def test_a_crash_between_archiving_and_removing_shows_each_run_once(
    nursery: trio.Nursery,
    redis: Redis,
    namespace: str,
    node,
    worker,
    tmp_path: Path,
    where: str,
    request: pytest.FixtureRequest,
) -> None:
    """On a local directory and on a real S3 API (moto's server, loopback)."""
    url = request.getfixturevalue("s3") if where == "s3" else f"file://{tmp_path / 'archive'}"
    dep = await open_with_archive(redis, namespace, url)
    http = await api(nursery, redis, dep)
    spec = {"name": "once", "command": "echo hi", "schedule": {"type": "interval", "every_s": 0.5}}
    job_id = (await http.post("/api/v1/jobs", json=spec)).json()["job_id"]
    shard = dep.keys_for(job_id).shard

    async def finished() -> int:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return sum(r["state"] == "succeeded" for r in runs) >= 4

    await wait_until(finished, timeout=20)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    everything = RetentionDefaults(max_age_s=None, max_runs=1)

    async def slice_() -> ops.Deployment:
        return await drive_async(retention_slice(dep, shard, 0, everything), redis)

    found = await wait_until(lambda: _nonempty(slice_), timeout=10)
    assert found.records == []  # no skip records, no DAG runs: just runs
    archive = open_archive(url)
    # the owner archived, then died before removing: twice, even
    archive.write(shard, found.runs, from_ms(found.now_ms))
    archive.write(shard, found.runs, from_ms(found.now_ms + 1))
    before = await all_runs(http, job_id, 2)
    ids = [r["run_id"] for r in before]
    assert len(ids) == len(set(ids)) and not any(r["archived"] for r in before)
    # the next owner's pass archives them again and removes them
    epoch = int(await redis.execute("GET", dep.shard(shard).epoch))
    expired = lua.decode_expired(
        await call_script(redis, lua.expire_history(dep.shard(shard), epoch, found.expiring))
    )
    assert expired is not None and expired.removed == len(found.runs) and expired.kept == 0
    after = await all_runs(http, job_id, 2)
    assert sorted(r["run_id"] for r in after) == sorted(ids)
    assert sum(r["archived"] for r in after) == len(found.runs)
    await http.aclose()


async def _nonempty(slice_):
    found = await slice_()
    return found if found.runs else None


async def test_what_retention_never_removes(
    nursery: trio.Nursery, redis: Redis, namespace: str, node, worker, tmp_path: Path
) -> None:
    """Unhandled dead letters, runs still running, and a stale owner's removal stay."""
    dep = await open_with_archive(redis, namespace, tmp_path / "archive")
    http = await api(nursery, redis, dep)
    now = {"type": "once", "at": "2020-01-01T00:00:00Z"}
    retry = {"max_attempts": 2, "base_s": 0, "jitter": False}
    bad = {"name": "bad", "command": "exit 3", "schedule": now, "retry_policy": retry}
    bad_id = (await http.post("/api/v1/jobs", json=bad)).json()["job_id"]
    slow = {"name": "slow", "command": "sleep 30", "schedule": now}
    slow_id = (await http.post("/api/v1/jobs", json=slow)).json()["job_id"]

    async def states(job_id: str) -> dict[str, str]:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return {r["run_id"]: r["state"] for r in runs}

    async def ready() -> bool:
        dead = "dead_letter" in (await states(bad_id)).values()
        return dead and "running" in (await states(slow_id)).values()

    await wait_until(ready, timeout=20)
    everything = RetentionDefaults(max_age_s=None, max_runs=1)
    for job_id in (bad_id, slow_id):
        shard = dep.keys_for(job_id).shard
        found = await drive_async(retention_slice(dep, shard, 0, everything), redis)
        chosen = {item.run.run_id for item in found.runs}
        # the failed first attempt may go; the dead letter and the running run may not
        assert chosen <= {r for r, st in (await states(bad_id)).items() if st == "failed"}
        # a stale epoch removes nothing
        sk = dep.shard(shard)
        epoch = int(await redis.execute("GET", sk.epoch))
        finished = [lua.Expiring.run(rid, None) for rid in await states(job_id)]
        stale = await call_script(redis, lua.expire_history(sk, epoch - 1, finished))
        assert lua.decode_expired(stale) is None
        # and a removal of runs that are not as archived keeps them
        kept = lua.decode_expired(await call_script(redis, lua.expire_history(sk, epoch, finished)))
        assert kept is not None and kept.removed == 0
    assert "running" in (await states(slow_id)).values()
    assert "dead_letter" in (await states(bad_id)).values()
    await http.aclose()


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_dag_runs_and_skip_records_leave_too_and_the_audit_does_not_change(
    nursery: trio.Nursery, redis: Redis, namespace: str, node, worker, tmp_path: Path
) -> None:
    dep = await open_with_archive(redis, namespace, tmp_path / "archive")
    http = await api(nursery, redis, dep)
    record = tmp_path / "ran.txt"
    dag = {
        "name": "etl",
        "schedule": {"type": "interval", "every_s": 0.5},
        "max_active_runs": 3,
        "retention": {"max_runs": 2},
        "tasks": [
            {"name": "extract", "command": recorder(record)},
            {"name": "load", "command": "true", "depends_on": ["extract"]},
        ],
    }
    dag_id = (await http.post("/api/v1/dags", json=dag)).json()["dag_id"]
    busy = {  # overlap forbid: ticks that find the last run still running are skipped
        "name": "busy",
        "command": "sleep 1",
        "schedule": {"type": "interval", "every_s": 0.2},
        "overlap": "forbid",
        "retention": {"max_age_s": 1},
    }
    busy_id = (await http.post("/api/v1/jobs", json=busy)).json()["job_id"]
    sk = dep.keys_for(dag_id)

    async def enough() -> bool:
        skips = await redis.execute("ZCARD", dep.keys_for(busy_id).skips(busy_id))
        return record.exists() and len(record.read_text().split()) >= 6 and skips >= 5

    await wait_until(enough, timeout=30)
    await http.patch(f"/api/v1/dags/{dag_id}", json={"status": "paused"})
    await http.patch(f"/api/v1/jobs/{busy_id}", json={"status": "paused"})

    async def quiet() -> bool:
        runs = (await http.get(f"/api/v1/dags/{dag_id}/runs")).json()["dag_runs"]
        busy_runs = (await http.get(f"/api/v1/jobs/{busy_id}/runs")).json()["runs"]
        return all(r["state"] in ("succeeded", "failed") for r in runs) and all(
            r["state"] == "succeeded" for r in busy_runs
        )

    await wait_until(quiet, timeout=20)
    await trio.sleep(1.1)  # the busy job's last run and skips pass its 1 s age
    before = await drive_async(audit(dep, settle_s=0), redis)
    assert before.missing == 0 and before.duplicated == 0 and before.skipped >= 5
    listed_before = (await http.get(f"/api/v1/dags/{dag_id}/runs", params={"limit": 1000})).json()
    await start_retainer(nursery, redis, dep, f"file://{tmp_path / 'archive'}")

    async def cleaned() -> bool:
        return (
            await redis.execute("ZCARD", sk.runs_of(dag_id)) == 2
            and await redis.execute("ZCARD", dep.keys_for(busy_id).skips(busy_id)) == 0
            and await redis.execute("ZCARD", dep.keys_for(busy_id).runs_of(busy_id)) == 0
            and await redis.execute("ZCARD", sk.runs_of(f"{dag_id}.load")) == 2
        )

    await wait_until(cleaned, timeout=20)
    after = await drive_async(audit(dep, settle_s=0), redis)
    same = ("expected", "fired", "skipped", "pending", "missing", "duplicated", "unexpected")
    assert {f: getattr(after, f) for f in same} == {f: getattr(before, f) for f in same}
    assert after.executions == before.executions

    # the DAG's runs read the same, two hot and the rest archived, with their tasks
    listed = (await http.get(f"/api/v1/dags/{dag_id}/runs", params={"limit": 1000})).json()
    strip = [{k: v for k, v in r.items() if k != "archived"} for r in listed["dag_runs"]]
    assert strip == [
        {k: v for k, v in r.items() if k != "archived"} for r in listed_before["dag_runs"]
    ]
    assert [r["archived"] for r in listed["dag_runs"]].count(False) == 2
    paged = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await http.get(f"/api/v1/dags/{dag_id}/runs", params=params)).json()
        paged += [r["dag_run_id"] for r in page["dag_runs"]]
        if not (cursor := page["next_cursor"]):
            break
    assert paged == [r["dag_run_id"] for r in listed["dag_runs"]]
    old = listed["dag_runs"][-1]["dag_run_id"]
    one = (await http.get(f"/api/v1/dag-runs/{old}")).json()
    assert one["archived"] is True and one["state"] == "succeeded"
    for task in one["tasks"]:  # its task runs' attempts come from the archive too
        assert task["state"] == "succeeded" and task["attempts"][0]["archived"] is True
    await http.aclose()


async def test_dead_letters_at_the_head_do_not_hold_back_the_runs_behind_them(
    redis: Redis, namespace: str, tmp_path: Path
) -> None:
    """A flaky job's unhandled dead letters stay hot forever; the finished runs after them
    must still leave. The records are written as the scripts leave them (old ticks)."""
    dep = await open_with_archive(redis, namespace, tmp_path / "archive")
    spec = JobSpec(name="flaky", command="true", schedule=IntervalSchedule(every_s=60))
    (created,) = await drive_async(ops.create_jobs(dep, [spec]), redis)
    job_id, sk = created.job_id, dep.keys_for(created.job_id)
    old = (await redis.time_ms()) - 3_600_000
    calls = []
    for n in range(100):  # 40 dead letters first, then 60 runs that succeeded
        tick = old + n * 1000
        rid = f"{job_id}:{tick}:1"
        state = "dead_letter" if n < 40 else "succeeded"
        calls += [
            ("HSET", sk.run(rid), "st", state, "c", tick, "f", tick + 5),
            ("ZADD", sk.runs_of(job_id), tick, rid),
        ]
        if state == "dead_letter":
            calls.append(("ZADD", sk.dead_letter, tick + 5, rid))
    await redis.pipeline(calls)
    defaults = RetentionDefaults(max_age_s=60)
    found = await drive_async(retention_slice(dep, sk.shard, 0, defaults, budget=30), redis)
    states = {item.run.state for item in found.runs}
    assert len(found.runs) == 30 and states == {RunState.SUCCEEDED}, (len(found.runs), states)
    assert found.more  # the budget ran out: the next pass comes at once
