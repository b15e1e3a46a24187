"""Wake tokens (store/ready.py): a firing wakes one idle worker, not the fleet; idle
workers cost Redis nothing; a full claim passes a token on, so idle workers join a burst;
a token lost is made up by the owner. Counted with Redis's own command statistics, which
include the commands scripts run (claim.lua's XREADGROUP is one per claim)."""

from __future__ import annotations

import trio

from conftest import wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.shard.manager import ShardManager
from shardsched.store import ready
from shardsched.store.drive import call_script, drive_async, redis_calls
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.redis import Redis
from shardsched.worker.handlers import handler
from shardsched.worker.worker import Worker
from workers import claims, settled


@handler("test-wake-sleep")
async def _sleeps(ctx: object) -> None:
    await trio.sleep(0.5)  # the job's work: half a second busy


async def until(condition, timeout: float) -> None:
    """Until a condition over the workers holds, looked at after each write to Redis."""

    async def holds() -> bool:
        return bool(condition())

    await wait_until(holds, timeout=timeout)


async def start_fleet(nursery: trio.Nursery, redis: Redis, dep, n: int, slots: int) -> list:
    fleet = [Worker(redis, dep, worker_id=f"w{i}", concurrency=slots) for i in range(n)]
    for w in fleet:
        await nursery.start(w.run)
    return fleet


async def test_a_firing_wakes_one_idle_worker_and_idle_workers_cost_nothing(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    fleet = await start_fleet(nursery, redis, dep, 20, 4)
    before = await settled(redis)
    await trio.sleep(2)  # waits out 2 s idle: twenty workers waiting, no shard swept
    assert await claims(redis) == before, "idle workers must not call claim"

    for i in range(10):  # ten firings, one at a time
        spec = JobSpec(name=f"once{i}", schedule=OnceSchedule(at=from_ms(0)), command="true")
        await drive_async(ops.create_job(dep, spec), redis)
        await until(lambda i=i: sum(w.completed for w in fleet) == i + 1, timeout=10)
    used = await claims(redis) - before
    print(f"10 firings, 20 idle workers: {used} claims")
    # Broadcast woke all twenty for each firing (200 claims, and a sweep of every shard
    # every 5 s on top); a token wakes one.
    assert used <= 20


async def test_a_full_claim_passes_a_token_on_so_idle_workers_join_a_burst(
    nursery: trio.Nursery, redis: Redis, dep: ops.Deployment
) -> None:
    # no node: the only token is the one pushed below, then those the workers pass on
    far = JobSpec(
        name="burst",
        schedule=OnceSchedule(at=from_ms(4_000_000_000_000)),
        command="handler:test-wake-sleep",
    )
    job_id = (await drive_async(ops.create_job(dep, far), redis)).job_id
    fleet = await start_fleet(nursery, redis, dep, 5, 2)
    await settled(redis)
    sk = dep.keys_for(job_id)
    for _ in range(40):  # forty runs on one shard's stream, no token pushed
        await call_script(redis, jobs_lua.trigger(sk, job_id, "test"))
    await redis_calls(redis, ready.push(dep.globals, [sk.shard]))  # one token
    with trio.fail_after(1.0):  # well before any of them could finish (0.5 s each)
        await until(lambda: sum(w.holdings.running_count for w in fleet) == 10, 1.0)
    await until(lambda: sum(w.completed for w in fleet) == 40, timeout=15)
    ran = sorted(w.completed for w in fleet)
    print(f"runs per worker: {ran}")
    assert all(n >= 4 for n in ran), ran


async def test_a_lost_token_is_made_up_by_the_owner(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    fleet = await start_fleet(nursery, redis, dep, 3, 4)
    await settled(redis)
    far = JobSpec(name="lost", schedule=OnceSchedule(at=from_ms(4_000_000_000_000)), command="true")
    job_id = (await drive_async(ops.create_job(dep, far), redis)).job_id
    sk = dep.keys_for(job_id)
    rewoken = node.waker.rewoken
    await call_script(redis, jobs_lua.trigger(sk, job_id, "test"))  # a run, and no token
    start = trio.current_time()
    await until(lambda: sum(w.completed for w in fleet) == 1, timeout=10)
    took = trio.current_time() - start
    print(f"a run with its token lost ran after {took:.2f} s")
    assert node.waker.rewoken > rewoken
    assert took < 4
