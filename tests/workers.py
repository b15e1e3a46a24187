"""Worker processes and one-off jobs for the tests that start and kill real workers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import child_env, drive_list, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops import listing
from shardsched.store.drive import drive_async


def start_worker(
    url: str, namespace: str, worker_id: str, log: Path, *extra: str, env: dict | None = None
) -> subprocess.Popen[bytes]:
    cmd = shardsched_cmd(
        "worker",
        "--redis",
        url,
        "--namespace",
        namespace,
        "--worker-id",
        worker_id,
        "--concurrency",
        "4",
        *extra,
    )
    with log.open("ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env or child_env())


async def once_job(redis, dep, command: str, lease_s: float, **fields) -> str:
    """Register a job due at once; returns its id."""
    spec = JobSpec(
        name="w", schedule=OnceSchedule(at=from_ms(0)), command=command, lease_s=lease_s, **fields
    )
    return (await drive_async(ops.create_job(dep, spec), redis)).job_id


async def wait_run(
    redis,
    dep,
    job_id: str,
    state: str,
    by: str | None = None,
    timeout: float = 20,
):
    """Until the job's newest run is in ``state`` (claimed by ``by``); returns its runs."""

    async def reached() -> list | None:
        runs = await drive_list(listing.runs_page(dep, job_id), redis)
        ok = bool(runs) and runs[0].state == state and by in (None, runs[0].claimed_by)
        return runs if ok else None

    return await wait_until(reached, timeout=timeout)
