"""Job processes live exactly as long as they should: past trio's 10 s idle-thread lifetime,
up to their timeout, and never past a kill -9 of their worker (see shardsched.runtime.lifeline)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from conftest import wait_until
from shardsched import ops
from shardsched.store.drive import drive_async
from waits import pids_gone
from workers import once_job, start_worker, wait_run


def group(pid: int) -> list[int]:
    """Live processes (zombies do not count: PID 1 here may be slow to reap) that are
    ``pid`` or belong to the process group it led."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, pgid = fields[0], int(fields[2])
        if state not in ("Z", "X") and pid in (int(stat.parent.name), pgid):
            out.append(int(stat.parent.name))
    return out


def gone(pid: int) -> bool:
    return not group(pid)


def test_a_killed_parent_takes_registered_and_marked_children_along(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, time\n"
        "from shardsched.runtime.lifeline import child_env, lifeline\n"
        # a job-like group (registered) whose shell left a background child behind
        "g = subprocess.Popen(['/bin/sh', '-c', 'sleep 60 & sleep 61'],"
        " start_new_session=True, env=child_env())\n"
        "lifeline().hold(g.pid, group=True)\n"
        # a process spawned and never registered: found by its environment marker
        "p = subprocess.Popen(['sleep', '62'], env=child_env())\n"
        "print(g.pid, p.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    job_group, unregistered = map(int, parent.stdout.readline().split())
    # the spawning thread of the parent is long gone by now in trio's case; here the point
    # is the kill -9: nothing of the parent may survive it
    members = group(job_group) + group(unregistered)
    parent.kill()
    parent.wait()
    pids_gone(members, timeout=1.0)  # each pidfd turns readable as its process ends
    assert gone(job_group), "the registered job group outlived its parent"
    assert gone(unregistered), "a marked child outlived its parent"
    parent.stdout.close()


async def test_kill_9_of_a_worker_kills_its_60s_job_within_a_second(
    node, redis, dep, redis_server, tmp_path
) -> None:
    pidfile = tmp_path / "job.pid"
    job_id = await once_job(
        redis, dep, f"echo $$ > {pidfile}; sleep 60; echo finished", lease_s=30, timeout_s=120
    )
    proc = start_worker(redis_server.url, dep.namespace, "w-kill", tmp_path / "w.log")
    try:
        await wait_run(redis, dep, job_id, "running", timeout=20)
        await wait_until(lambda: _read_pid(pidfile), timeout=10)
        pid = int(pidfile.read_text())
        members = group(pid)  # the job's shell and its sleep
        assert members
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ended = await trio.to_thread.run_sync(pids_gone, members, 1.0)
        assert ended and gone(pid), "the job outlived its worker by more than a second"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def _read_pid(path: Path) -> bool:
    return path.exists() and path.read_text().strip().isdigit()


async def run_long_job(node_fixtures, seconds: int, timeout_s: int, wait_s: float) -> None:
    """A job of ``seconds`` on a worker process left idle meanwhile: one run, one attempt,
    its output complete."""
    redis, dep, redis_server, tmp_path = node_fixtures
    command = f"sleep {seconds}; echo finished"
    job_id = await once_job(redis, dep, command, lease_s=30, timeout_s=timeout_s)
    proc = start_worker(redis_server.url, dep.namespace, f"w-{seconds}", tmp_path / "w.log")
    try:
        runs = await wait_run(redis, dep, job_id, "succeeded", timeout=wait_s)
        assert len(runs) == 1 and runs[0].attempt == 1, runs
        output = await drive_async(ops.get_output(dep, runs[0].run_id), redis)
        assert output.output == "finished\n", output
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow  # ~16 s
async def test_a_15s_job_on_an_idle_worker_succeeds(
    node, redis, dep, redis_server, tmp_path
) -> None:
    """The bug this guards: trio spawns from a cached thread that retires after 10 s idle,
    and PR_SET_PDEATHSIG killed the job with it, 10.0 s after its start (15 s is past
    that; the three-minute job below is the `slow` step's)."""
    await run_long_job((redis, dep, redis_server, tmp_path), 15, timeout_s=120, wait_s=45)


@pytest.mark.slow
async def test_a_3_minute_job_under_a_600s_timeout_succeeds(
    node, redis, dep, redis_server, tmp_path
) -> None:
    await run_long_job((redis, dep, redis_server, tmp_path), 180, timeout_s=600, wait_s=240)
