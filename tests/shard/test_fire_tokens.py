"""The owner's fire call carries the default queue's wake token in its own write when
one of its items surely puts a run there (shard/waker.fire_and_wake): on one server the
token lands after the runs, one round trip per firing instead of two; an item with an
overlap decision, another queue, or a client whose pipeline is not ordered (a cluster's)
leaves the token to the reply, as before. On real Redis."""

from __future__ import annotations

from shardsched import IntervalSchedule, JobSpec, ops
from shardsched.core.models import Overlap, Timing
from shardsched.shard.waker import fire_and_wake
from shardsched.store.drive import drive_async
from shardsched.store.lua import firing
from shardsched.store.redis import Redis


async def _due_job(redis: Redis, dep: ops.Deployment) -> tuple[str, int, int]:
    spec = JobSpec(name="j", schedule=IntervalSchedule(every_s=60), command="true")
    job = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    sk = dep.keys_for(job)
    sk_ = dep.shard(sk.shard)
    (epoch,) = await redis.script("acquire_lease", (sk_.owner, sk_.epoch), ("n", 5000, "n"))
    due = await redis.time_ms() - 10
    await redis.execute("ZADD", sk.timer, due, job)
    return job, due, int(epoch)


async def _fire(redis: Redis, dep: ops.Deployment, overlap: Overlap, queue: bytes = b""):
    job, due, epoch = await _due_job(redis, dep)
    sk = dep.keys_for(job)
    item = firing.plan(job, due, due, due + 60_000, None, overlap, queue)
    call = firing.fire(sk, epoch=epoch, count=0, lookahead_ms=0, missed=0, items=[item])
    reply, pushed = await fire_and_wake(redis, dep.globals, sk.shard, call, [item])
    fired = firing.decode_fired(reply)
    tokens = await redis.execute("LRANGE", dep.globals.ready_tokens, 0, -1)
    runs = await redis.execute("XLEN", sk.ready)
    return fired, pushed, tokens, runs, sk.shard


async def test_a_sure_run_carries_its_token(redis, dep) -> None:
    fired, pushed, tokens, runs, shard = await _fire(redis, dep, Overlap.ALLOW)
    assert not isinstance(fired, int) and fired.fired == 1 and runs == 1
    assert pushed and tokens == [str(shard).encode()]


async def test_an_overlap_decision_or_another_queue_waits_for_the_reply(redis, dep) -> None:
    fired, pushed, tokens, runs, _ = await _fire(redis, dep, Overlap.FORBID)
    assert not isinstance(fired, int) and fired.fired == 1 and runs == 1
    assert not pushed and tokens == []  # the actor wakes the reply's queues, as before
    fired, pushed, tokens, _, _ = await _fire(redis, dep, Overlap.ALLOW, b"^h")
    assert not pushed and tokens == []


async def test_a_pipeline_out_of_order_waits_for_the_reply(redis_server, dep) -> None:
    class Unordered(Redis):
        in_order = False  # as a cluster's pipeline: each node's share apart

    client = Unordered(redis_server.url)
    try:
        fired, pushed, tokens, runs, _ = await _fire(client, dep, Overlap.ALLOW)
    finally:
        await client.aclose()
    assert not isinstance(fired, int) and fired.fired == 1 and runs == 1
    assert not pushed and tokens == []


async def test_no_waker_no_token(redis, dep) -> None:
    job, due, epoch = await _due_job(redis, dep)
    sk = dep.keys_for(job)
    item = firing.plan(job, due, due, due + 60_000, None, Overlap.ALLOW)
    call = firing.fire(sk, epoch=epoch, count=0, lookahead_ms=0, missed=0, items=[item])
    _, pushed = await fire_and_wake(redis, None, sk.shard, call, [item])
    assert not pushed and await redis.execute("LLEN", dep.globals.ready_tokens) == 0


def test_a_spread_job_at_offset_zero_still_says_when_it_was_planned() -> None:
    """A job's spread offset is 0 for one id in spread_ms (1 in 3,000 with spread_s 3): its
    run still carries ``planned_for``, like every other run of a spread job (a CI run of
    200 spread jobs found one without it)."""
    timing = Timing(schedule=IntervalSchedule(every_s=60), spread_s=3)
    item = firing.plan("job_x", 1000, 1000, 61_000, None, Overlap.ALLOW, b"", 0, timing)
    assert item[-1] == 1000
    bare = firing.plan("job_x", 1000, 1000, 61_000, None, Overlap.ALLOW, b"", 0, None)
    assert bare[-1] == ""
