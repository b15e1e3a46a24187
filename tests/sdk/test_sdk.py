"""The SDK: every API operation through shardsched.Client (redis-py) and AsyncClient (trio),
typed results and clear exceptions (issue #7)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import trio

from conftest import wait_until
from shardsched import (
    AsyncClient,
    Client,
    CronSchedule,
    IntervalSchedule,
    JobDeleted,
    JobNotFound,
    JobPatch,
    JobSpec,
    OnceSchedule,
    RetryPolicy,
    RunNotFound,
    ValidationError,
)
from shardsched.core.models import Catchup
from shardsched.core.views import Job, RunList

HOURLY = IntervalSchedule(every_s=3600)


def sync_tour(url: str, namespace: str) -> dict:
    """Every synchronous operation once, in a worker thread (it blocks)."""
    seen: dict = {}
    with Client(url, namespace) as client:
        created = client.add_job(JobSpec(name="sdk-ok", schedule=HOURLY, command="echo hi"))
        job = client.get_job(created.job_id)
        assert isinstance(job, Job) and job.name == "sdk-ok"
        bulk = client.add_jobs(
            [JobSpec(name=f"sdk-bulk-{i}", schedule=HOURLY, command="true") for i in range(30)],
            batch=7,
        )
        assert len(bulk) == 30
        page = client.list_jobs(limit=10, name_prefix="sdk-bulk-")
        assert len(page.jobs) == 10 and page.next_cursor
        rest = client.list_jobs(limit=100, cursor=page.next_cursor, name_prefix="sdk-bulk-")
        assert len(page.jobs) + len(rest.jobs) == 30 and rest.next_cursor is None
        changed = client.update_job(created.job_id, JobPatch(command="echo changed"))
        assert changed.version == 2
        until = datetime.now(UTC) + timedelta(days=1)
        paused = client.pause(created.job_id, reason="sdk test", until=until)
        assert paused.pause_reason == "sdk test" and paused.paused_until is not None
        assert client.resume(created.job_id).status == "active"
        assert [v.version for v in client.job_versions(created.job_id).versions] == [1, 2, 3, 4]
        triggered = client.trigger(created.job_id)
        seen["run_id"] = triggered.run_id
        preview = client.next_fire_times(CronSchedule(expression="0 3 * * *"), count=2)
        assert len(preview.fire_times) == 2
        upcoming = client.upcoming_fires(created.job_id, count=3)  # from its next fire on
        assert upcoming.fire_times[0].at == client.get_job(created.job_id).next_run_at
        assert len(upcoming.fire_times) == 3 and upcoming.schedule_words == "every 1h"
        start = datetime.now(UTC) - timedelta(hours=3)
        backfilled = client.backfill(
            client.add_job(
                JobSpec(
                    name="sdk-bf",
                    schedule=IntervalSchedule(every_s=3600, start_at=start),
                    command="true",
                    catchup=Catchup.NONE,  # a past start_at is a phase: the past is for a backfill
                )
            ).job_id,
            start,
            start + timedelta(hours=2),
            max_concurrent=2,
        )
        assert backfilled.ticks == 3 and backfilled.queued == 3
        failing = client.add_job(
            JobSpec(
                name="sdk-dead",
                schedule=OnceSchedule(at=datetime(2020, 1, 1, tzinfo=UTC)),
                command="exit 1",
                retry_policy=RetryPolicy(max_attempts=2, base_s=0.1, max_s=0.1, jitter=False),
            )
        )
        seen["dead_job"] = failing.job_id

        with pytest.raises(JobNotFound):
            client.get_job("job_000000000000")
        with pytest.raises(RunNotFound):
            client.get_run("job_000000000000:1:1")
        with pytest.raises(ValidationError) as bad:
            client.add_job(
                JobSpec(name="x", schedule=CronSchedule(expression="61 * * * *"), command="true")
            )
        assert bad.value.field == "$.schedule.expression"
        client.delete_job(bulk[0].job_id)
        with pytest.raises(JobDeleted):
            client.trigger(bulk[0].job_id)
        seen["created"] = created.job_id
    return seen


def sync_results(url: str, namespace: str, seen: dict) -> None:
    with Client(url, namespace) as client:
        run = client.get_run(seen["run_id"])
        assert run.state == "succeeded" and run.job_version == 4
        assert client.get_output(seen["run_id"]).output == "changed\n"
        runs = client.list_runs(seen["created"], state="succeeded")
        assert isinstance(runs, RunList) and [r.run_id for r in runs.runs] == [seen["run_id"]]
        dead = client.list_dead_letter()
        (dead_run,) = [r for r in dead.runs if r.job_id == seen["dead_job"]]
        again = client.retry_run(dead_run.run_id)
        assert again.attempt == dead_run.attempt + 1


async def test_sync_client_covers_every_operation(node, worker, redis_server, dep) -> None:
    seen = await trio.to_thread.run_sync(sync_tour, redis_server.url, dep.namespace)

    async def finished() -> bool:
        def check() -> bool:
            with Client(redis_server.url, dep.namespace) as client:
                done = client.get_run(seen["run_id"]).state == "succeeded"
                return done and bool(client.list_dead_letter().runs)

        return await trio.to_thread.run_sync(check)

    await wait_until(finished, timeout=20)
    await trio.to_thread.run_sync(sync_results, redis_server.url, dep.namespace, seen)


async def test_async_client(node, worker, redis_server, dep) -> None:
    async with await AsyncClient.open(redis_server.url, dep.namespace) as client:
        assert client.deployment == dep
        created = await client.add_job(JobSpec(name="async", schedule=HOURLY, command="true"))
        assert (await client.get_job(created.job_id)).name == "async"
        assert (
            len(await client.add_jobs([JobSpec(name="a2", schedule=HOURLY, command="true")])) == 1
        )
        triggered = await client.trigger(created.job_id)

        async def done() -> bool:
            return (await client.get_run(triggered.run_id)).state == "succeeded"

        await wait_until(done)
        upcoming = await client.upcoming_fires(created.job_id, count=2)
        assert len(upcoming.fire_times) == 2 and upcoming.stops is None
        jobs = await client.list_jobs(name_prefix="async")
        assert [j.job_id for j in jobs.jobs] == [created.job_id]
        with pytest.raises(ValidationError) as bad:
            await client.add_job(
                JobSpec(name="x", schedule=IntervalSchedule(every_s=0.01), command="true")
            )
        assert bad.value.field == "$.schedule.every_s"
        with pytest.raises(JobNotFound):
            await client.get_job("job_000000000000")


def test_bulk_registration_with_a_batch_in_flight(own_redis_server) -> None:
    """add_jobs writes batch k+1 before it reads batch k back (sdk/sync.py, _overlapped):
    every job is registered once, in order; a server that lost its scripts mid-way gets
    them again; a batch written after a failed one is still named in the error."""
    import redis as redis_py

    from shardsched import BulkPartiallyApplied
    from shardsched.core.errors import IdTaken

    r = redis_py.Redis.from_url(own_redis_server.url)
    client = Client(own_redis_server.url, "inflight")
    try:
        specs = [JobSpec(name=f"f{i}", schedule=HOURLY, command="true") for i in range(95)]
        real = client._read_back
        asked = {"n": 0}

        def flush_on_first(conn, op, calls):  # the scripts vanish while batch 2 is in flight
            asked["n"] += 1
            if asked["n"] == 1:
                r.function_flush()
            return real(conn, op, calls)

        reload = client._load_scripts
        reloads = {"n": 0}

        def counted() -> None:
            reloads["n"] += 1
            reload()

        client._read_back, client._load_scripts = flush_on_first, counted
        created = client.add_jobs(specs, batch=10)
        client._read_back = real
        assert reloads["n"] >= 1, "the batches after the flush found no function"
        assert [c.job_id for c in created] == [c.job_id for c in created if c.next_run_at]
        assert len({c.job_id for c in created}) == 95
        listed = {j.job_id: j.name for j in client.list_jobs(limit=200).jobs}
        assert {listed[c.job_id] for c in created} == {s.name for s in specs}
        assert sum(r.zcard(f"inflight:{{{s}}}:timer") for s in range(64)) == 95

        # batch 1 holds a taken id: batch 2 was written before batch 1 was read back,
        # so it is registered, and the error says so.
        taken = JobSpec(id="chosen-1", name="again", schedule=HOURLY, command="true")
        client.add_job(taken)
        fresh = [JobSpec(name=f"g{i}", schedule=HOURLY, command="true") for i in range(19)]
        with pytest.raises(BulkPartiallyApplied) as partial:
            client.add_jobs([taken, *fresh], batch=10)
        assert isinstance(partial.value.error, IdTaken)
        named = {c.job_id for c in partial.value.created}
        names = {j.job_id: j.name for j in client.list_jobs(limit=300).jobs}
        assert {names[j] for j in named} == {f"g{i}" for i in range(9, 19)}
    finally:
        client.close()
        r.close()
