"""Worker processes and one-off jobs for the tests that start and kill real workers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import trio

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


async def lines_at_least(path: Path, n: int) -> bool:
    """Whether the file a job writes to has ``n`` lines (one per execution) or more."""
    return path.exists() and len(path.read_text().splitlines()) >= n


async def command_calls(redis, command: str) -> int:
    """How many times the server has run ``command`` so far (INFO commandstats)."""
    info = (await redis.execute("INFO", "commandstats")).decode()
    for line in info.splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


async def claims(redis) -> int:
    """XREADGROUP calls so far on the server: claim.lua makes one per stream it reads."""
    return await command_calls(redis, "xreadgroup")


async def settled(redis) -> int:
    """Wait until no claim has run for half a second (the workers' start-up look at every
    shard is over); the count then."""
    last = await claims(redis)
    with trio.fail_after(20):
        while True:
            await trio.sleep(0.5)  # waits out a half second with no claim: quiet is the event
            now = await claims(redis)
            if now == last:
                return now
            last = now
