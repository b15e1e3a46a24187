"""Worker leases with real processes: a killed worker's run is delivered again under the same
run id; a paused worker cannot complete a run it no longer holds."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
import trio

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import audit, ops

pytestmark = pytest.mark.slow


def start_worker(url: str, namespace: str, worker_id: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            shardsched_cmd(
                "worker",
                "--redis",
                url,
                "--namespace",
                namespace,
                "--worker-id",
                worker_id,
                "--concurrency",
                "4",
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )


async def run_fields(redis, dep, rid: str, *fields: str) -> list:  # type: ignore[no-untyped-def]
    return await redis.execute("HMGET", dep.keys_for(rid).run(rid), *fields)


@pytest.fixture
def workers(redis_server, dep, tmp_path):  # type: ignore[no-untyped-def]
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(worker_id: str) -> subprocess.Popen[bytes]:
        procs[worker_id] = start_worker(
            redis_server.url, dep.namespace, worker_id, tmp_path / f"{worker_id}.log"
        )
        return procs[worker_id]

    yield start
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()


async def test_killed_worker_run_is_delivered_again_with_the_same_run_id(
    node, redis, dep, workers, tmp_path
) -> None:
    marks = tmp_path / "executions"
    body = {
        "name": "crashy",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": f'echo "$SHARDSCHED_RUN_ID $SHARDSCHED_ATTEMPT" >> {marks}; sleep 2',
        "lease_s": 1,
        "timeout_s": 30,
    }
    import msgspec

    from shardsched.models import JobSpec

    spec = msgspec.convert(body, JobSpec)
    job_id = (await ops.drive_async(ops.create_job(dep, spec), redis)).job_id
    w1 = workers("w1")
    await wait_until(lambda: _lines(marks, 1), timeout=15)
    w1.send_signal(signal.SIGKILL)
    w1.wait()
    workers("w2")

    async def succeeded() -> list | None:
        runs = await ops.drive_async(ops.list_runs(dep, job_id), redis)
        return runs if runs and runs[0].state == "succeeded" else None

    runs = await wait_until(succeeded, timeout=20)
    assert len(runs) == 1, "one trigger: the same run, not a new one"
    run = runs[0]
    assert run.claimed_by == "w2" and run.attempt == 1
    executions = marks.read_text().split("\n")[:-1]
    assert executions == [f"{run.run_id} 1", f"{run.run_id} 1"], executions
    deliveries, reclaims = await run_fields(redis, dep, run.run_id, "dt", "rc")
    assert (deliveries, reclaims) == (b"2", b"1")
    report = await ops.drive_async(audit.audit(dep, settle_s=0), redis)
    assert report.fired == 1 and report.duplicated == 0 and report.missing == 0


async def test_paused_worker_cannot_complete_a_run_it_lost(
    node, redis, dep, workers, tmp_path
) -> None:
    marks = tmp_path / "executions"
    from shardsched.models import JobSpec, OnceSchedule
    from shardsched.shard.cron import from_ms

    spec = JobSpec(
        name="paused",
        schedule=OnceSchedule(at=from_ms(0)),
        lease_s=1,
        command=f'echo "$SHARDSCHED_RUN_ID" >> {marks}; sleep 1.5; echo done',
    )
    job_id = (await ops.drive_async(ops.create_job(dep, spec), redis)).job_id
    w1 = workers("w1")
    await wait_until(lambda: _lines(marks, 1), timeout=15)
    w1.send_signal(signal.SIGSTOP)  # a long GC pause, a frozen VM: its lease lapses
    workers("w2")

    async def done_by_w2() -> bool:
        runs = await ops.drive_async(ops.list_runs(dep, job_id), redis)
        return bool(runs) and runs[0].state == "succeeded" and runs[0].claimed_by == "w2"

    await wait_until(done_by_w2, timeout=20)
    rid = (await ops.drive_async(ops.list_runs(dep, job_id), redis))[0].run_id
    w1.send_signal(signal.SIGCONT)  # it wakes believing it still runs the job
    await trio.sleep(3)
    state, claimed_by, superseded = await run_fields(redis, dep, rid, "st", "w", "sx")
    assert (state, claimed_by) == (b"succeeded", b"w2"), "the stale worker changed nothing"
    assert int(superseded or 0) >= 1, "its renewal or completion was refused and recorded"


async def _lines(path: Path, n: int) -> bool:
    return path.exists() and len(path.read_text().splitlines()) >= n
