"""A run whose command ends its worker is poison: after it ended POISON_LAPSES workers
(each lease lapsed), it fails with the reason and its job is quarantined (paused with the
reason), instead of killing every next worker, tick after tick. Real worker processes,
killed by the job itself; the job's own record of each start is the independent check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from conftest import RedisServer, child_env, rounds_later, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops import listing
from shardsched.ops.history import audit
from shardsched.shard.reclaimer import POISON_LAPSES
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis


def start_worker(server: RedisServer, namespace: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            shardsched_cmd("worker", "--redis", server.url, "--namespace", namespace),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_a_run_that_ends_its_worker_three_times_is_poison_and_its_job_quarantined(
    node, redis: Redis, redis_server: RedisServer, dep: ops.Deployment, namespace: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    starts = tmp_path / "starts"
    spec = JobSpec(
        name="killer",
        schedule=IntervalSchedule(every_s=3600),
        command=f"echo $SHARDSCHED_RUN_ID >> {starts}; kill -9 $PPID",  # its worker
        lease_s=1,
    )
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    run_id = (await drive_async(ops.trigger(dep, job_id), redis)).run_id
    ended = 0
    with trio.fail_after(60):
        while True:
            worker = start_worker(redis_server, namespace, tmp_path / "worker.log")
            code = await trio.to_thread.run_sync(worker.wait)
            assert code == -9, f"the worker ended otherwise: {code}"
            ended += 1
            if ended == POISON_LAPSES:
                break

    async def failed():
        got = await drive_async(ops.get_run(dep, run_id), redis)
        return got if got.state == "failed" else None

    run = await wait_until(failed, timeout=20)
    assert "poison" in (run.reason or ""), run
    job = await drive_async(ops.get_job(dep, job_id), redis)
    assert job.status == "paused", job
    assert job.pause_reason.startswith("quarantined: poison"), job.pause_reason
    # the next worker lives: nothing hands it the run again
    survivor = start_worker(redis_server, namespace, tmp_path / "worker.log")
    try:
        # three maintenance rounds of the owner (3 s, three lease lengths): a redelivery
        # would have come meanwhile, and would have killed the survivor
        await rounds_later(lambda: node.maintainer.rounds, 3)
        assert survivor.poll() is None
    finally:
        survivor.terminate()
        survivor.wait(timeout=20)
    assert starts.read_text().split() == [run_id] * POISON_LAPSES  # the job's own record
    runs = (await drive_async(listing.runs_page(dep, job_id, 10), redis)).runs
    assert [r.run_id for r in runs] == [run_id]


@pytest.mark.slow  # three workers killed in turn
async def test_ticks_buffered_behind_a_poison_run_are_recorded_skipped(
    node, redis: Redis, redis_server: RedisServer, dep: ops.Deployment, namespace: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """A buffered job whose active run is poison: once it is quarantined, the tick that
    waited behind that run does not run (its job is paused), and is not lost either: it
    is recorded skipped ('quarantined'), so the audit finds nothing missing."""
    spec = JobSpec(
        name="buffered-killer",
        schedule=IntervalSchedule(every_s=1),
        command="kill -9 $PPID",  # its worker
        lease_s=1,
        overlap="buffer_one",
    )
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    with trio.fail_after(90):
        for _ in range(POISON_LAPSES):
            worker = start_worker(redis_server, namespace, tmp_path / "worker.log")
            assert await trio.to_thread.run_sync(worker.wait) == -9

    async def quarantined():
        job = await drive_async(ops.get_job(dep, job_id), redis)
        return job if job.status == "paused" else None

    await wait_until(quarantined, timeout=20)
    ticks = (await drive_async(audit.job_ticks(dep, job_id, None, None, 500), redis)).ticks
    reasons = [t.reason for t in ticks if t.outcome == "skipped"]
    assert "quarantined" in reasons, ticks
    assert await redis.execute("EXISTS", dep.keys_for(job_id).watch.buffer(job_id)) == 0
    report = await drive_async(audit.audit(dep, settle_s=0.0), redis)
    assert report.missing == 0 and report.duplicated == 0, report
