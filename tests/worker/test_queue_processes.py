"""Queues with real worker processes (`shardsched worker --queues`): a run of a killed
worker goes back to its own queue and a worker of that queue runs it; a draining worker
hands a run back onto its queue and priority. Checked with the audit and with what the
jobs write themselves."""

from __future__ import annotations

import signal

import pytest
import trio

from conftest import wait_until
from shardsched.core.queues import Priority
from shardsched.ops.history import audit
from shardsched.store.drive import drive_async
from workers import lines_at_least, once_job, wait_run

pytestmark = pytest.mark.processes


async def test_a_killed_workers_run_goes_back_to_its_queue_only(
    node, redis, dep, workers, tmp_path
) -> None:
    marks = tmp_path / "executions"
    command = f'echo "$SHARDSCHED_RUN_ID $SHARDSCHED_ATTEMPT" >> {marks}; sleep 2'
    job_id = await once_job(redis, dep, command, lease_s=1, timeout_s=30, queue="gpu")
    plain = workers("w-plain")  # serves the default queue only: must never run it
    first = workers("w-gpu-a", "--queues", "gpu")
    await wait_until(lambda: lines_at_least(marks, 1), timeout=15)
    first.send_signal(signal.SIGKILL)
    first.wait()
    workers("w-gpu-b", "--queues", "gpu,default")

    (run,) = await wait_run(redis, dep, job_id, "succeeded", timeout=20)
    assert run.claimed_by == "w-gpu-b" and run.queue == "gpu" and run.attempt == 1
    executions = marks.read_text().splitlines()
    assert executions == [f"{run.run_id} 1", f"{run.run_id} 1"], executions
    assert plain.poll() is None
    report = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert report.fired == 1 and report.duplicated == 0 and report.missing == 0


async def test_a_draining_worker_hands_a_run_back_onto_its_queue_and_priority(
    node, redis, dep, workers, tmp_path
) -> None:
    flag = tmp_path / "first-execution-started"
    command = f"if [ -f {flag} ]; then echo second; else touch {flag}; sleep 60; fi"
    first = workers("w-drain", "--queues", "gpu", "--drain-grace", "1")
    job_id = await once_job(redis, dep, command, lease_s=60, queue="gpu", priority=Priority.HIGH)
    await wait_run(redis, dep, job_id, "running", timeout=15)
    await wait_until(lambda: lines_at_least(flag, 0), timeout=15)
    workers("w-other-queue", "--queues", "cpu")
    workers("w-takes-over", "--queues", "cpu,gpu")
    start = trio.current_time()
    first.send_signal(signal.SIGTERM)
    (run,) = await wait_run(redis, dep, job_id, "succeeded", by="w-takes-over", timeout=20)
    print(f"handed over in {trio.current_time() - start:.2f} s (lease 60 s)")
    assert trio.current_time() - start < 10
    assert run.queue == "gpu" and run.priority == "high"
    report = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert report.fired == 1 and report.duplicated == 0 and report.missing == 0
