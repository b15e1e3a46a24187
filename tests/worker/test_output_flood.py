"""A job that floods its output cannot fill Redis: one printing 64 KiB ten times a second
for a minute (about 39 MB) keeps only its last 64 KiB in Redis, the rest counted, and its
run says it was truncated; Redis's memory stays flat meanwhile. Minute-long: `slow`."""

from __future__ import annotations

import sys

import pytest

from conftest import wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops import listing
from shardsched.store.drive import drive_async
from shardsched.worker.runner import OUTPUT_LIMIT

CHUNK = 64 * 1024
FLOOD = (
    f'{sys.executable} -c "import sys, time\n'
    "for _ in range(600):\n"
    "    sys.stdout.write('x' * 65535 + chr(10)); sys.stdout.flush(); time.sleep(0.1)\""
)


async def used_memory(redis) -> int:
    info = (await redis.execute("INFO", "memory")).decode()
    return int(next(line for line in info.splitlines() if line.startswith("used_memory:"))[12:])


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_flood_of_output_leaves_redis_bounded_and_says_so(node, worker, redis, dep) -> None:
    spec = JobSpec(name="flood", schedule=OnceSchedule(at=from_ms(0)), command=FLOOD,
                   timeout_s=200)  # fmt: skip
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id

    async def run_of():
        runs = (await drive_async(listing.runs_page(dep, job_id, 1), redis)).runs
        return runs[0] if runs and runs[0].state == "running" else None

    run = await wait_until(run_of, timeout=20)
    out_key = dep.keys_for(job_id).output(run.run_id)
    baseline = await used_memory(redis)
    peak_kept, peak_memory = 0, baseline

    async def ended():  # sampled after each write: every flush of the output is one
        nonlocal peak_kept, peak_memory
        peak_kept = max(peak_kept, await redis.execute("STRLEN", out_key))
        peak_memory = max(peak_memory, await used_memory(redis))
        got = await drive_async(ops.get_run(dep, run.run_id), redis)
        return got if got.state not in ("scheduled", "running") else None

    got = await wait_until(ended, timeout=150)
    assert got.state == "succeeded", got
    output = await drive_async(ops.get_output(dep, run.run_id), redis)
    assert output.truncated is True
    assert output.total_bytes == 600 * CHUNK, output.total_bytes  # every byte counted
    assert len(output.output.encode()) <= OUTPUT_LIMIT
    assert peak_kept <= 2 * OUTPUT_LIMIT, peak_kept  # while it ran, too
    assert await redis.execute("STRLEN", out_key) <= OUTPUT_LIMIT
    print(f"printed {output.total_bytes:,} B; Redis grew {peak_memory - baseline:,} B at most")
    assert peak_memory - baseline < 8 * 1024 * 1024, peak_memory - baseline
