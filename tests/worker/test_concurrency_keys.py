"""Concurrency limits per key (core/concurrency.py, lua/ck_*.lua, worker/limits.py): never
more than the limit run at once across workers, the rest wait without holding a slot and
start in the order they came; a limit changes live; a dead worker's hold frees with its
lease; a rate limit paces starts. Real node and workers (in-process), real Redis."""

from __future__ import annotations

import msgspec
import pytest
import trio

from conftest import drive_list, wait_until
from nodes import run_audit
from shardsched import ops
from shardsched.core.concurrency import LimitRequest, RateLimit
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops import listing
from shardsched.ops.deployment import concurrency
from shardsched.shard.manager import ShardManager
from shardsched.store import keys as k
from shardsched.store.drive import call_script, drive_async, redis_calls
from shardsched.store.lua import concurrency as ck_lua
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.lua import runs as runs_lua
from shardsched.store.redis import Redis
from shardsched.worker.handlers import HandlerContext, handler
from shardsched.worker.worker import Worker

FAR = from_ms(4_000_000_000_000)

#: (job id, event, trio time) of every run of the handlers below, in order
_stamps: list[tuple[str, str, float]] = []


@handler("test-ck-sleep")
async def _sleep(ctx: HandlerContext) -> None:
    _stamps.append((ctx.job_id, "start", trio.current_time()))
    await trio.sleep(float(ctx.args.get("s", 0.05)))
    _stamps.append((ctx.job_id, "end", trio.current_time()))


def most_at_once(stamps: list[tuple[str, str, float]]) -> int:
    running = peak = 0
    for _job, event, _t in sorted(stamps, key=lambda s: (s[2], s[1] == "start")):
        running += 1 if event == "start" else -1
        peak = max(peak, running)
    return peak


def running_at(stamps: list[tuple[str, str, float]], t: float, but: str) -> int:
    """How many runs (other than ``but``) had started and not ended at ``t``."""
    started = {job for job, event, at in stamps if event == "start" and at <= t and job != but}
    ended = {job for job, event, at in stamps if event == "end" and at <= t}
    return len(started - ended)


async def start(nursery: trio.Nursery, redis: Redis, dep, wid: str, slots: int = 4) -> Worker:
    w = Worker(redis, dep, worker_id=wid, concurrency=slots)
    await nursery.start(w.run)
    return w


def keyed(name: str, key: str = "tenant:{labels.tenant}", tenant: str = "acme", **fields):
    return JobSpec(
        name=name,
        schedule=OnceSchedule(at=from_ms(0)),
        command="handler:test-ck-sleep",
        concurrency_key=key,
        labels={"tenant": tenant},
        **fields,
    )


async def done(redis: Redis, dep, job_ids: list[str], timeout: float = 60) -> None:
    async def all_done() -> bool:
        for job_id in job_ids:
            runs = await drive_list(listing.runs_page(dep, job_id), redis)
            if not runs or runs[0].state != "succeeded":
                return False
        return True

    await wait_until(all_done, timeout=timeout)


async def test_never_more_than_the_limit_run_at_once_and_all_finish(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    _stamps.clear()
    await drive_async(concurrency.set_limits(dep, "tenant:acme", LimitRequest(limit=3), "t"), redis)
    workers = [await start(nursery, redis, dep, f"w-ck-{i}") for i in range(4)]
    ids = []
    for i in range(60):
        spec = msgspec.structs.replace(keyed(f"j{i}"), args={"s": 0.05})
        ids.append((await drive_async(ops.create_job(dep, spec), redis)).job_id)
    await done(redis, dep, ids)
    assert len([s for s in _stamps if s[1] == "start"]) == 60
    assert most_at_once(_stamps) == 3
    assert sum(w.limits.parked for w in workers) > 0, "nothing ever waited: the test tests nothing"
    view = await drive_async(concurrency.get_key(dep, "tenant:acme"), redis)
    assert view.limit == 3 and view.running == 0 and view.waiting == 0
    report = await run_audit(redis, dep)
    assert report.ok, report


async def test_waiting_runs_start_in_the_order_they_came_and_hold_no_slot(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    """Limit 1: the runs start one by one, in the order they were refused; meanwhile the
    one worker (2 slots) runs an unkeyed job at once: waiting runs took no slot."""
    _stamps.clear()
    await drive_async(concurrency.set_limits(dep, "fifo", LimitRequest(limit=1), "t"), redis)
    ids: list[str] = []
    for i in range(400):  # job ids of one shard: one stream, so claims come in order
        job_id = f"fifo-{i}"
        if ids and k.shard_of(job_id, dep.n_shards) != k.shard_of(ids[0], dep.n_shards):
            continue
        spec = msgspec.structs.replace(keyed(f"f{i}", key="fifo"), args={"s": 0.2})
        spec = msgspec.structs.replace(spec, schedule=OnceSchedule(at=FAR), id=job_id)
        ids.append((await drive_async(ops.create_job(dep, spec), redis)).job_id)
        if len(ids) == 6:
            break
    for job_id in ids:  # one by one, so their order is known
        await call_script(redis, jobs_lua.trigger(dep.keys_for(job_id), job_id, "test"))
        await trio.sleep(0.01)  # apart in time, so their order on the key is known
    await start(nursery, redis, dep, "w-fifo", slots=2)

    async def waiting_some() -> bool:
        return (await drive_async(concurrency.get_key(dep, "fifo"), redis)).waiting >= 4

    await wait_until(waiting_some, timeout=10)
    runs = [(await drive_list(listing.runs_page(dep, j), redis))[0] for j in ids]
    waiting = [r for r in runs if r.state == "waiting"]
    assert waiting and all(r.concurrency_key == "fifo" and not r.claimed_by for r in waiting)
    assert all(r.started_at is None for r in waiting)  # parked, not started
    job = await drive_async(ops.get_job(dep, ids[-1]), redis)
    assert job.concurrency_key == "fifo"
    free = msgspec.structs.replace(keyed("free", key="other"), concurrency_key=None)
    free_id = (await drive_async(ops.create_job(dep, free), redis)).job_id
    await done(redis, dep, [free_id], timeout=5)  # started while the keyed runs wait
    await done(redis, dep, ids, timeout=30)
    starts = [job for job, event, _ in _stamps if event == "start" and job != free_id]
    assert most_at_once([s for s in _stamps if s[0] != free_id]) == 1
    assert starts == ids  # in the order they came
    run = (await drive_list(listing.runs_page(dep, ids[-1]), redis))[0]
    assert run.state == "succeeded"


async def test_raising_and_lowering_a_limit_takes_effect_at_the_next_start(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    _stamps.clear()
    key = "live"
    await drive_async(concurrency.set_limits(dep, key, LimitRequest(limit=1), "alice"), redis)
    for i in range(2):
        await start(nursery, redis, dep, f"w-live-{i}")
    ids = []
    for i in range(12):
        spec = msgspec.structs.replace(keyed(f"l{i}", key=key), args={"s": 0.3})
        ids.append((await drive_async(ops.create_job(dep, spec), redis)).job_id)

    async def waiting() -> bool:
        view = await drive_async(concurrency.get_key(dep, key), redis)
        return view.waiting >= 8 and view.running == 1

    await wait_until(waiting, timeout=10)
    raised_at = trio.current_time()
    view = await drive_async(concurrency.set_limits(dep, key, LimitRequest(limit=4), "bob"), redis)
    assert view.limit == 4 and view.running == 4  # granted at once, not at the next end

    async def four_running() -> bool:
        return sum(1 for s in _stamps if s[1] == "start" and s[2] >= raised_at) >= 3

    await wait_until(four_running, timeout=5)
    assert most_at_once(_stamps) == 4
    await drive_async(concurrency.set_limits(dep, key, LimitRequest(limit=1), "carol"), redis)

    async def under_it() -> bool:  # runs granted before the change finish (they may start)
        return (await drive_async(concurrency.get_key(dep, key), redis)).running <= 1

    await wait_until(under_it, timeout=10)
    lowered_at = trio.current_time()
    await done(redis, dep, ids, timeout=30)
    # lowered: the runs holding it finish, and a run starts only once no other runs
    later = [(job, t) for job, event, t in _stamps if event == "start" and t > lowered_at]
    assert later, "every run started before the limit was lowered: the test tests nothing"
    for job, t in later:
        assert running_at(_stamps, t, but=job) == 0, f"{job} started beside another"
    view = await drive_async(concurrency.get_key(dep, key), redis)
    assert [(c.actor, c.limit) for c in view.changes] == [("carol", 1), ("bob", 4), ("alice", 1)]
    assert view.changes[0].at >= view.changes[1].at >= view.changes[2].at


async def test_a_dead_workers_hold_frees_when_its_lease_lapses(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    """A worker claims a keyed run, is granted the key and vanishes: the run is reclaimed
    when its lease lapses, and another run of the key starts."""
    key = "crash"
    await drive_async(concurrency.set_limits(dep, key, LimitRequest(limit=1), "t"), redis)
    spec = msgspec.structs.replace(keyed("c", key=key), schedule=OnceSchedule(at=FAR), lease_s=1)
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    sk = dep.keys_for(job_id)
    await call_script(redis, jobs_lua.trigger(sk, job_id, "test"))
    (claimed,) = runs_lua.decode_claimed(
        await call_script(redis, runs_lua.claim(sk, dep.globals, "vanished", 1))
    )
    reply = await call_script(
        redis, ck_lua.ck_acquire(dep.concurrency(key), [ck_lua.Ask(claimed.run_id, 1000, 0)])
    )
    assert ck_lua.decode_acquired(reply, 1).granted == (True,)
    other = (await drive_async(ops.create_job(dep, keyed("o", key=key)), redis)).job_id
    await start(nursery, redis, dep, "w-after-crash")
    await done(redis, dep, [other, job_id], timeout=30)


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_a_rate_limit_paces_starts(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    _stamps.clear()
    key = "paced"
    rate = LimitRequest(rate=RateLimit(max=2, per_s=1.0))
    await drive_async(concurrency.set_limits(dep, key, rate, "t"), redis)
    await start(nursery, redis, dep, "w-paced", slots=8)
    ids = []
    for i in range(8):
        spec = msgspec.structs.replace(keyed(f"p{i}", key=key), args={"s": 0.01})
        ids.append((await drive_async(ops.create_job(dep, spec), redis)).job_id)
    await done(redis, dep, ids, timeout=30)
    starts = sorted(t for _job, event, t in _stamps if event == "start")
    assert len(starts) == 8
    for i in range(2, len(starts)):  # any 3 consecutive starts span the interval
        assert starts[i] - starts[i - 2] >= 0.95, starts
    assert starts[-1] - starts[0] < 8, "the paced runs took far longer than the rate says"


async def test_one_keys_backlog_delays_another_keys_run_by_one_turn_at_most(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    """A noisy tenant's 10,000 runs are on the stream before a quiet tenant's one and an
    unkeyed one: with 2 slots, the quiet ones start within the first turns, not after the
    10,000 (the claim takes the queue's keys, and its own stream, in turn: lua/claim.lua)."""
    _stamps.clear()
    ids: list[str] = []
    for i in range(2000):  # three job ids of one shard
        job_id = f"fair-{i}"
        if ids and k.shard_of(job_id, dep.n_shards) != k.shard_of(ids[0], dep.n_shards):
            continue
        ids.append(job_id)
        if len(ids) == 3:
            break
    noisy, quiet, plain = ids
    for job_id, key in ((noisy, "tenant:noisy"), (quiet, "tenant:quiet"), (plain, None)):
        spec = msgspec.structs.replace(
            keyed(job_id, key=key or "x"), concurrency_key=key, schedule=OnceSchedule(at=FAR)
        )
        spec = msgspec.structs.replace(spec, id=job_id, args={"s": 0.05})
        await drive_async(ops.create_job(dep, spec), redis)
    sk = dep.keys_for(noisy)
    for _ in range(10):  # 10,000 runs of the noisy key, before the quiet ones
        await redis_calls(redis, [jobs_lua.trigger(sk, noisy, "test")] * 1000)
    await call_script(redis, jobs_lua.trigger(sk, quiet, "test"))
    await call_script(redis, jobs_lua.trigger(sk, plain, "test"))
    await start(nursery, redis, dep, "w-fair", slots=2)
    await done(redis, dep, [quiet, plain], timeout=30)
    starts = [job for job, event, _ in _stamps if event == "start"]
    assert starts.index(quiet) < 4 and starts.index(plain) < 4, starts[:6]
    assert starts.count(noisy) < 20, "the quiet runs waited behind the backlog"


async def test_a_keyed_run_whose_token_was_lost_is_found_by_the_owner(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    """A keyed run put on its stream with no wake token (trigger.lua alone) while the only
    worker waits for one: the owner's look for undelivered runs sees the queue's ring of
    keys and wakes a worker (shard/waker.py)."""
    _stamps.clear()
    worker = await start(nursery, redis, dep, "w-lost-token")
    await trio.sleep(0.5)  # it looked at every shard and waits for a token now
    spec = msgspec.structs.replace(keyed("lost", key="lost-token"), schedule=OnceSchedule(at=FAR))
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    await call_script(redis, jobs_lua.trigger(dep.keys_for(job_id), job_id, "test"))
    await done(redis, dep, [job_id], timeout=15)
    assert worker.completed == 1 and node.waker.rewoken >= 1
