"""Priorities (core/queues.py): a claim takes a shard's higher bands first, one claim in
ten gives the low band (and one the normal band) a share so no band starves, backfill runs
go to the low band unless asked, and a worker serving a queue reads the bands its jobs
named."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import trio

from conftest import drive_list, wait_until
from shardsched import ops
from shardsched.core.backfill import BackfillRequest
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule, JobSpec, OnceSchedule
from shardsched.core.queues import Priority, claim_plan, parse_stored, stored, streams
from shardsched.ops import listing
from shardsched.shard.manager import ShardManager
from shardsched.store import keys as k
from shardsched.store.drive import call_script, drive_async
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.lua import runs as runs_lua
from shardsched.store.redis import Redis
from shardsched.worker.streams import Streams
from shardsched.worker.worker import Worker

FAR = from_ms(4_000_000_000_000)


def test_a_claims_plan_is_strict_but_in_one_of_ten_turns() -> None:
    order = streams(("gpu", "default"), {"gpu^h", "^l"})
    assert order == ("gpu^h", "gpu", "", "^l")
    assert claim_plan(order, 20, 1) == [(s, 20) for s in order]
    assert claim_plan(order, 20, 4) == [("gpu", 2), ("", 2), *[(s, 20) for s in order]]
    assert claim_plan(order, 20, 9) == [("^l", 2), *[(s, 20) for s in order]]
    assert claim_plan(("",), 5, 9) == [("", 5)]  # no band known: nothing to share
    assert parse_stored("gpu^h") == ("gpu", Priority.HIGH)
    assert parse_stored("^l") == ("default", Priority.LOW)
    assert parse_stored("") == ("default", Priority.NORMAL)
    assert stored("default", "high") == "^h" and stored("gpu", "low") == "gpu^l"


async def same_shard_jobs(redis: Redis, dep, specs: list[JobSpec], prefix: str) -> list[str]:
    """Register ``specs`` under ids that all hash onto one shard; their ids."""
    ids: list[str] = []
    shard = None
    i = 0
    while len(ids) < len(specs):
        job_id = f"{prefix}-{i}"
        i += 1
        s = k.shard_of(job_id, dep.n_shards)
        shard = s if shard is None else shard
        if s == shard:
            spec = msgspec.structs.replace(specs[len(ids)], id=job_id)
            ids.append((await drive_async(ops.create_job(dep, spec), redis)).job_id)
    return ids


def far(name: str, priority: str = "normal", queue: str = "default") -> JobSpec:
    return JobSpec(
        name=name,
        schedule=OnceSchedule(at=FAR),
        command="true",
        priority=Priority(priority),
        queue=queue,
    )


async def test_a_claim_takes_higher_bands_first_and_lower_ones_get_their_share(
    redis: Redis, dep: ops.Deployment
) -> None:
    low, normal, high = await same_shard_jobs(
        redis, dep, [far("l", "low"), far("n"), far("h", "high")], "prio"
    )
    sk = dep.keys_for(low)
    for job_id in (low, normal, high):  # the low runs oldest, the high ones newest
        for _ in range(12):
            await call_script(redis, jobs_lua.trigger(sk, job_id, "test"))
    reader = Streams(("default",))
    await reader.refresh(redis, dep, ops_metrics())
    assert reader.order == ("^h", "", "^l")
    taken = []
    for _ in range(20):  # one run a claim, as a worker with one free slot
        call = runs_lua.claim(sk, dep.globals, "one-slot", 1, reader.plan(1))
        (claimed,) = runs_lua.decode_claimed(await call_script(redis, call))
        reader.took(0, 1)
        taken.append(claimed.run_id.split(":")[0])
    names = {low: "L", normal: "N", high: "H"}
    assert "".join(names[j] for j in taken) == "HHHNHHHHLHHHHNHNNNLN"
    runs = await drive_list(listing.runs_page(dep, low), redis)
    assert {r.priority for r in runs} == {Priority.LOW}


def ops_metrics():
    from shardsched.runtime.metrics import Metrics

    return Metrics()


async def test_under_contention_a_high_run_starts_first_and_a_low_one_is_not_starved(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    low, high = await same_shard_jobs(redis, dep, [far("l", "low"), far("h", "high")], "race")
    sk = dep.keys_for(low)
    for _ in range(3):
        await call_script(redis, jobs_lua.trigger(sk, low, "test"))
    for _ in range(30):
        await call_script(redis, jobs_lua.trigger(sk, high, "test"))
    worker = Worker(redis, dep, worker_id="w-one-slot", concurrency=1)
    await nursery.start(worker.run)

    async def all_done():
        runs = []
        for job_id in (low, high):
            runs += await drive_list(listing.runs_page(dep, job_id, limit=100), redis)
        return runs if all(r.state == "succeeded" for r in runs) and len(runs) == 33 else None

    runs = await wait_until(all_done, timeout=30)
    order = [r.job_id for r in sorted(runs, key=lambda r: r.started_at)]
    first_low = order.index(low)
    print("start order:", "".join("L" if j == low else "H" for j in order))
    assert first_low >= 5, "the high runs, newer, start first"
    assert first_low < 15, "a low run is not starved behind every high one"


async def test_backfill_runs_are_low_unless_asked_and_do_not_delay_scheduled_runs(
    redis: Redis, dep: ops.Deployment
) -> None:
    every = JobSpec(name="hourly", schedule=IntervalSchedule(every_s=60), command="true")
    back, other, now = await same_shard_jobs(redis, dep, [every, every, far("now")], "bf")
    job = await drive_async(ops.get_job(dep, back), redis)
    since = job.created_at - timedelta(minutes=30)
    request = BackfillRequest(since=since, until=job.created_at, max_concurrent=10)
    result = await drive_async(ops.backfill(dep, back, request), redis)
    assert result.queued >= 10
    sk = dep.keys_for(back)
    for _ in range(5):  # scheduled work arrives after the backfill's
        await call_script(redis, jobs_lua.trigger(sk, now, "test"))
    reader = Streams(("default",))
    await reader.refresh(redis, dep, ops_metrics())
    taken = []
    for _ in range(6):
        call = runs_lua.claim(sk, dep.globals, "w", 1, reader.plan(1))
        (claimed,) = runs_lua.decode_claimed(await call_script(redis, call))
        reader.took(0, 1)
        taken.append(claimed.run_id.split(":")[0])
    assert taken[:5] == [now] * 5 and taken[5] == back
    runs = await drive_list(listing.runs_page(dep, back), redis)
    assert runs and {r.priority for r in runs} == {Priority.LOW}

    # asked for: a backfill at a high priority goes first
    again = BackfillRequest(since=since, until=job.created_at, max_concurrent=3, priority="high")
    assert (await drive_async(ops.backfill(dep, other, again), redis)).started == 3
    await call_script(redis, jobs_lua.trigger(sk, now, "test"))
    await reader.refresh(redis, dep, ops_metrics())
    assert reader.order == ("^h", "", "^l")
    call = runs_lua.claim(sk, dep.globals, "w", 1, reader.plan(1))
    (claimed,) = runs_lua.decode_claimed(await call_script(redis, call))
    assert claimed.run_id.split(":")[0] == other


async def test_a_worker_learns_a_band_from_its_token_and_reads_only_its_queues_bands(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    worker = Worker(redis, dep, worker_id="w-bands", concurrency=2, queues=("gpu",))
    await nursery.start(worker.run)
    assert worker.streams.order == ("gpu",)
    urgent = JobSpec(
        name="urgent", schedule=OnceSchedule(at=from_ms(0)), command="true",
        queue="gpu", priority=Priority.HIGH,
    )  # fmt: skip
    job_id = (await drive_async(ops.create_job(dep, urgent), redis)).job_id

    async def done():
        runs = await drive_list(listing.runs_page(dep, job_id), redis)
        return runs[0] if runs and runs[0].state == "succeeded" else None

    run = await wait_until(done, timeout=10)
    assert run.claimed_by == "w-bands" and run.queue == "gpu" and run.priority == "high"
    assert worker.streams.order == ("gpu^h", "gpu")
    worker.streams.learn(["^l", "other^h"])  # another queue's bands are not its to read
    assert worker.streams.order == ("gpu^h", "gpu")
