"""Output quotas: what Redis keeps of every run's output is counted per job and per shard
(the deployment's share), and a run past either keeps only the tail that fits (none when
nothing does), says which quota cut it, and still counts every byte it printed; removing
a run's output (retention) gives its bytes back."""

from __future__ import annotations

from conftest import wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops import listing
from shardsched.store.drive import call_script, drive_async
from shardsched.store.lua import retention as retention_lua
from shardsched.store.lua.runs import OutputQuota
from shardsched.worker.worker import Worker

PRINT_2000 = "head -c 2000 /dev/zero | tr '\\0' x"


async def run_thrice(nursery, redis, dep, quota: OutputQuota) -> tuple[str, list]:
    worker = Worker(redis, dep, "quota-worker", concurrency=1, output_quota=quota)
    await nursery.start(worker.run)
    spec = JobSpec(name="loud", schedule=OnceSchedule(at=from_ms(10**13)), command=PRINT_2000)
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    outputs = []
    for _ in range(3):  # one after another: each sees what the last one kept
        rid = (await drive_async(ops.trigger(dep, job_id), redis)).run_id

        async def ended(rid=rid):
            run = await drive_async(ops.get_run(dep, rid), redis)
            return run if run.state == "succeeded" else None

        await wait_until(ended, timeout=20)
        outputs.append(await drive_async(ops.get_output(dep, rid), redis))
    return job_id, outputs


async def test_a_job_keeps_no_more_output_than_its_quota(node, nursery, redis, dep) -> None:
    job_id, (first, second, third) = await run_thrice(nursery, redis, dep, OutputQuota(3000, 0))
    assert (len(first.output), first.quota, first.truncated) == (2000, None, False)
    assert (len(second.output), second.quota, second.truncated) == (1000, "job", True)
    assert (len(third.output), third.quota) == (0, "job")
    assert first.total_bytes == second.total_bytes == third.total_bytes == 2000  # all counted
    sk = dep.keys_for(job_id)
    assert int(await redis.execute("HGET", sk.counters(job_id), "ob")) == 3000

    # retention removes the first run (archived elsewhere first): its 2000 bytes come back
    epoch = int(await redis.execute("GET", sk.epoch))
    finished = int(await redis.execute("HGET", sk.run(first.run_id), "f"))
    call = retention_lua.expire_history(
        sk, epoch, [retention_lua.Expiring.run(first.run_id, finished)]
    )
    assert (await call_script(redis, call))[1] == 1
    assert int(await redis.execute("HGET", sk.counters(job_id), "ob")) == 1000
    assert int(await redis.execute("HGET", sk.stats, "ob")) == 1000


async def test_a_deployment_keeps_no_more_output_than_its_quota(node, nursery, redis, dep) -> None:
    _, (first, second, third) = await run_thrice(nursery, redis, dep, OutputQuota(0, 2500))
    assert (len(first.output), first.quota) == (2000, None)
    assert (len(second.output), second.quota, second.truncated) == (500, "deployment", True)
    assert (len(third.output), third.quota) == (0, "deployment")
    assert third.total_bytes == 2000


async def test_live_output_is_held_to_the_quota_too(node, nursery, redis, dep) -> None:
    """While a run prints, its flushed output counts against the same quotas."""
    worker = Worker(redis, dep, "quota-live", concurrency=1, output_quota=OutputQuota(1500, 0))
    await nursery.start(worker.run)
    command = f"{PRINT_2000}; sleep 4; echo"
    spec = JobSpec(name="live", schedule=OnceSchedule(at=from_ms(0)), command=command)
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id

    async def flushed():
        runs = (await drive_async(listing.runs_page(dep, job_id, 1), redis)).runs
        if not runs or runs[0].state != "running":
            return None
        out = await drive_async(ops.get_output(dep, runs[0].run_id), redis)
        return out if out.total_bytes >= 2000 else None

    live = await wait_until(flushed, timeout=20)
    assert len(live.output) == 1500 and live.quota == "job", live
    sk = dep.keys_for(job_id)
    assert int(await redis.execute("HGET", sk.counters(job_id), "ob")) == 1500


async def test_the_tail_each_run_keeps_is_the_worker_s_to_set(node, nursery, redis, dep) -> None:
    worker = Worker(redis, dep, "tail", concurrency=1, output_quota=OutputQuota(run=100))
    await nursery.start(worker.run)
    spec = JobSpec(name="tail", schedule=OnceSchedule(at=from_ms(0)), command=PRINT_2000)
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id

    async def done():
        runs = (await drive_async(listing.runs_page(dep, job_id, 1), redis)).runs
        return runs[0] if runs and runs[0].state == "succeeded" else None

    run = await wait_until(done, timeout=20)
    out = await drive_async(ops.get_output(dep, run.run_id), redis)
    assert (len(out.output), out.total_bytes, out.truncated) == (100, 2000, True)


def test_the_worker_s_output_flags() -> None:
    import argparse

    import pytest

    from shardsched.cli.flags import job_limit_flags, output_quota_sizes
    from shardsched.core.errors import ConfigError

    parser = argparse.ArgumentParser()
    job_limit_flags(parser)
    tail, per_job, total = output_quota_sizes(parser.parse_args(["--output-tail", "1M"]))
    assert (tail, per_job, total) == (1024**2, 64 * 1024**2, 1024**3)
    # as serve_worker makes it: the deployment's quota shared by its shards
    quota = OutputQuota.of(per_job, total, 64, tail)
    assert quota == OutputQuota(64 * 1024**2, 1024**3 // 64, 1024**2)
    with pytest.raises(ConfigError, match="at most 16M"):
        output_quota_sizes(parser.parse_args(["--output-tail", "32M"]))
