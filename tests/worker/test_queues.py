"""Queues (core/queues.py, lua/lib/queues.lua): a worker claims only the queues it serves,
in its order; a run stays on its queue through retries, reclaims and hand-backs; tokens
wake only workers of the queue that got runs; a DAG's tasks each go to their own queue."""

from __future__ import annotations

import msgspec
import pytest
import trio

from conftest import drive_list, wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import (
    DagSpec,
    IntervalSchedule,
    JobSpec,
    OnceSchedule,
    RetryPolicy,
    TaskSpec,
)
from shardsched.core.patches import JobPatch
from shardsched.ops import listing
from shardsched.ops.dags import dag_runs, manage
from shardsched.shard.manager import ShardManager
from shardsched.store import keys as k
from shardsched.store.drive import call_script, drive_async
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.lua import runs as runs_lua
from shardsched.store.redis import Redis
from shardsched.worker.handlers import HandlerContext, handler
from shardsched.worker.worker import Worker
from workers import claims, settled

FAR = from_ms(4_000_000_000_000)


_attempts: dict[str, int] = {}


@handler("test-queue-fails-once")
async def _fails_once(ctx: HandlerContext) -> None:
    _attempts[ctx.job_id] = _attempts.get(ctx.job_id, 0) + 1
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")


async def start(nursery: trio.Nursery, redis: Redis, dep, wid: str, *queues: str) -> Worker:
    w = Worker(redis, dep, worker_id=wid, concurrency=4, queues=queues or ("default",))
    await nursery.start(w.run)
    return w


async def newest_run(redis: Redis, dep, job_id: str, state: str = "succeeded", timeout=15):
    async def reached():
        runs = await drive_list(listing.runs_page(dep, job_id), redis)
        return runs[0] if runs and runs[0].state == state else None

    return await wait_until(reached, timeout=timeout)


def once(name: str, queue: str = "default", **fields) -> JobSpec:
    return JobSpec(
        name=name, schedule=OnceSchedule(at=from_ms(0)), command="true", queue=queue, **fields
    )


async def test_each_worker_claims_only_the_queues_it_serves(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    gpu = await start(nursery, redis, dep, "w-gpu", "gpu")
    plain = await start(nursery, redis, dep, "w-default")
    both = await start(nursery, redis, dep, "w-db", "db", "default")
    ids = {}
    for i in range(6):
        for queue in ("gpu", "default", "db"):
            created = await drive_async(ops.create_job(dep, once(f"{queue}{i}", queue)), redis)
            ids[created.job_id] = queue
    for job_id, queue in ids.items():
        run = await newest_run(redis, dep, job_id)
        assert run.queue == queue
        if queue == "gpu":
            assert run.claimed_by == "w-gpu"
        elif queue == "db":
            assert run.claimed_by == "w-db"
        else:
            assert run.claimed_by in ("w-default", "w-db")
        job = await drive_async(ops.get_job(dep, job_id), redis)
        assert job.queue == queue
    assert gpu.completed == 6 and plain.completed + both.completed == 12


async def test_a_claim_reads_the_workers_queues_in_its_order(
    redis: Redis, dep: ops.Deployment
) -> None:
    """One shard, three runs on each of two queues: a worker serving (urgent, bulk) gets
    the urgent ones first, then bulk; one serving only bulk never sees urgent's."""
    shard = None
    made: dict[str, str] = {}
    for i in range(200):  # two job ids on one shard, one per queue
        job_id = f"q-order-{i}"
        s = k.shard_of(job_id, dep.n_shards)
        if shard is None:
            shard = s
        if s != shard:
            continue
        queue = "bulk" if "bulk" not in made.values() else "urgent"
        spec = msgspec.structs.replace(once("o", queue), schedule=OnceSchedule(at=FAR), id=job_id)
        await drive_async(ops.create_job(dep, spec), redis)
        made[job_id] = queue
        if len(made) == 2:
            break
    assert shard is not None and len(made) == 2
    sk = dep.shard(shard)
    bulk, urgent = sorted(made, key=lambda j: made[j] != "bulk")
    for job_id in (bulk, bulk, bulk, urgent, urgent, urgent):  # bulk's are older
        await call_script(redis, jobs_lua.trigger(sk, job_id, "test"))

    async def claim(worker: str, count: int, queues: tuple[str, ...]) -> list[str]:
        call = runs_lua.claim(sk, dep.globals, worker, count, queues)
        return [c.run_id for c in runs_lua.decode_claimed(await call_script(redis, call))]

    assert await claim("bulk-only", 0 + 1, ("bulk",)) == [f"{bulk}:t1:1"]
    got = await claim("both", 4, ("urgent", "bulk"))
    assert got == [f"{urgent}:t1:1", f"{urgent}:t2:1", f"{urgent}:t3:1", f"{bulk}:t2:1"]
    assert await claim("default-only", 10, ("",)) == []
    assert await claim("both", 10, ("urgent", "bulk")) == [f"{bulk}:t3:1"]


async def test_tokens_wake_only_workers_of_the_queue_that_got_runs(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    gpu = await start(nursery, redis, dep, "w-gpu-only", "gpu")
    before = await settled(redis)
    plain = [
        (await drive_async(ops.create_job(dep, once(f"d{i}")), redis)).job_id for i in range(5)
    ]
    await trio.sleep(1.5)  # waits out the owner's firing and a wake-up check: no claim
    assert await claims(redis) == before, "a gpu worker was woken for default-queue runs"
    assert gpu.completed == 0
    for job_id in plain:  # they wait, scheduled, for a worker of their queue
        run = (await drive_list(listing.runs_page(dep, job_id), redis))[0]
        assert run.state == "scheduled" and run.queue == "default"
    job_id = (await drive_async(ops.create_job(dep, once("g", "gpu")), redis)).job_id
    run = await newest_run(redis, dep, job_id)
    assert run.claimed_by == "w-gpu-only"
    await start(nursery, redis, dep, "w-late-default")
    for job_id in plain:
        await newest_run(redis, dep, job_id)


async def test_a_retry_and_a_reclaimed_run_stay_on_their_queue(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    await start(nursery, redis, dep, "w-gpu-1", "gpu")
    await start(nursery, redis, dep, "w-other")
    retry = RetryPolicy(max_attempts=2, base_s=0.1, max_s=0.1, jitter=False)
    spec = once("flaky", "gpu", retry_policy=retry)
    spec = msgspec.structs.replace(spec, command="handler:test-queue-fails-once")
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    run = await newest_run(redis, dep, job_id)
    assert run.attempt == 2 and run.queue == "gpu" and run.claimed_by == "w-gpu-1"

    # a run claimed by a worker that then vanished: its lease lapses, the owner puts it
    # back on its own queue's stream, and a worker of that queue runs it
    far = msgspec.structs.replace(once("lapsed", "gpu", lease_s=1), schedule=OnceSchedule(at=FAR))
    job_id = (await drive_async(ops.create_job(dep, far), redis)).job_id
    sk = dep.keys_for(job_id)
    await call_script(redis, jobs_lua.trigger(sk, job_id, "test"))  # no token: nobody wakes
    call = runs_lua.claim(sk, dep.globals, "vanished", 1, ("gpu",))
    (claimed,) = runs_lua.decode_claimed(await call_script(redis, call))
    run = await newest_run(redis, dep, job_id, timeout=20)
    assert run.run_id == claimed.run_id and run.claimed_by == "w-gpu-1" and run.queue == "gpu"


async def test_a_dags_tasks_each_run_on_their_own_queue(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    await start(nursery, redis, dep, "w-cpu")
    await start(nursery, redis, dep, "w-gpu-2", "gpu")
    spec = DagSpec(
        name="pipeline",
        schedule=IntervalSchedule(every_s=3600),
        tasks=[
            TaskSpec(name="extract", command="true"),
            TaskSpec(name="train", command="true", depends_on=["extract"], queue="gpu"),
            TaskSpec(name="load", command="true", depends_on=["train"]),
        ],
    )
    dag_id = (await drive_async(manage.create_dag(dep, spec), redis)).dag_id
    dag_run_id = (await drive_async(manage.trigger_dag(dep, dag_id), redis)).dag_run_id

    async def settled_run():
        run = await drive_async(dag_runs.get_dag_run(dep, dag_run_id), redis)
        return run if run.state == "succeeded" else None

    await wait_until(settled_run, timeout=20)
    by_task = {}
    for task in ("extract", "train", "load"):
        job_id = k.task_job_id(dag_id, task)
        runs = await drive_list(listing.runs_page(dep, job_id), redis)
        by_task[task] = (runs[0].queue, runs[0].claimed_by)
    assert by_task == {
        "extract": ("default", "w-cpu"),
        "train": ("gpu", "w-gpu-2"),
        "load": ("default", "w-cpu"),
    }
    train = await drive_async(ops.get_job(dep, k.task_job_id(dag_id, "train")), redis)
    assert train.queue == "gpu"


async def test_moving_a_job_to_another_queue_takes_its_next_run_there(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    await start(nursery, redis, dep, "w-a", "a")
    await start(nursery, redis, dep, "w-b", "b")
    spec = msgspec.structs.replace(once("mover", "a"), schedule=OnceSchedule(at=FAR))
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    first = (await drive_async(ops.trigger(dep, job_id), redis)).run_id
    job = await drive_async(ops.patch_job(dep, job_id, JobPatch(queue="b")), redis)
    assert job.queue == "b" and job.version == 2
    second = (await drive_async(ops.trigger(dep, job_id), redis)).run_id
    runs = {r.run_id: r for r in await drive_list(listing.runs_page(dep, job_id), redis)}

    async def both_done():
        runs = {r.run_id: r for r in await drive_list(listing.runs_page(dep, job_id), redis)}
        return runs if all(runs[r].state == "succeeded" for r in (first, second)) else None

    runs = await wait_until(both_done, timeout=15)
    assert (runs[first].queue, runs[first].claimed_by) == ("a", "w-a")
    assert (runs[second].queue, runs[second].claimed_by) == ("b", "w-b")
    job = await drive_async(ops.patch_job(dep, job_id, JobPatch(queue="default")), redis)
    assert job.queue == "default"
    sk = dep.keys_for(job_id)
    assert await redis.execute("HGET", sk.job(job_id), "q") is None


@pytest.mark.parametrize("queue", ["GPU", "has space", "", "a" * 65, "-lead", "x:y", "q\x00"])
async def test_a_bad_queue_name_is_refused_and_writes_nothing(
    redis: Redis, dep: ops.Deployment, queue: str
) -> None:
    before = await redis.execute("DBSIZE")
    with pytest.raises(msgspec.ValidationError) as err:
        await drive_async(ops.create_job(dep, once("bad", queue)), redis)
    assert "queue" in str(err.value)
    assert await redis.execute("DBSIZE") == before


async def test_a_queue_no_live_worker_serves_shows_in_status_and_metrics(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    from shardsched.ops.deployment.status import status_view
    from shardsched.runtime.metrics import Metrics, refresh_cluster

    await start(nursery, redis, dep, "w-served", "served")
    for i in range(3):
        await drive_async(ops.create_job(dep, once(f"orphan{i}", "orphan")), redis)
    await drive_async(ops.create_job(dep, once("fine", "served")), redis)

    async def waiting():
        st = await drive_async(status_view(dep), redis)
        queues = {q.queue: q for q in st.queues}
        orphan = queues.get("orphan")
        return st if orphan is not None and orphan.ready == 3 else None

    st = await wait_until(waiting, timeout=15)
    queues = {q.queue: q for q in st.queues}
    assert queues["orphan"].unserved and queues["orphan"].workers == 0
    assert not queues["served"].unserved and queues["served"].workers == 1
    assert st.ready >= 3
    metrics = Metrics()
    refresh_cluster(metrics, st)
    text = metrics.render()[0].decode()
    assert 'shardsched_queue_unserved{queue="orphan"} 1.0' in text
    assert 'shardsched_queue_runs_ready{queue="orphan"} 3.0' in text
    assert 'shardsched_queue_unserved{queue="served"} 0.0' in text
    from shardsched.cli.status import render

    screen = render(st)
    assert "orphan" in screen and "UNSERVED: no live worker" in screen


async def test_a_worker_restarted_under_its_id_takes_up_its_runs_of_every_queue(
    nursery: trio.Nursery, redis: Redis, dep: ops.Deployment
) -> None:
    held = []
    for queue in ("gpu", "default"):
        spec = msgspec.structs.replace(once(f"held-{queue}", queue), schedule=OnceSchedule(at=FAR))
        job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
        sk = dep.keys_for(job_id)
        await call_script(redis, jobs_lua.trigger(sk, job_id, "test"))
        call = runs_lua.claim(sk, dep.globals, "w-restarted", 1, ("gpu", ""))
        (claimed,) = runs_lua.decode_claimed(await call_script(redis, call))
        held.append((job_id, claimed.run_id))
    w = await start(nursery, redis, dep, "w-restarted", "gpu", "default")
    for job_id, run_id in held:
        run = await newest_run(redis, dep, job_id)
        assert run.run_id == run_id and run.claimed_by == "w-restarted"
    assert w.completed == 2
