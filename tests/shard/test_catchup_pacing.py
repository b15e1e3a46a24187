"""One job's catch-up backlog never delays other jobs' on-time ticks: late ticks fire one
per job per fire batch, beside the jobs that are on time."""

from __future__ import annotations

import pytest
import trio

from conftest import drive_list
from shardsched import ops
from shardsched.core.models import Catchup, IntervalSchedule, JobSpec
from shardsched.ops import listing
from shardsched.store.drive import drive_async


@pytest.mark.slow  # moved out of the default run to keep it under 8 min
async def test_a_backlog_of_100k_ticks_drains_beside_on_time_jobs(node, redis, dep) -> None:
    on_time = [
        c.job_id
        for c in await drive_async(
            ops.create_jobs(
                dep,
                [
                    JobSpec(name=f"p{i}", schedule=IntervalSchedule(every_s=0.5), command="true")
                    for i in range(40)
                ],
            ),
            redis,
        )
    ]
    spec = JobSpec(
        name="backlog",
        schedule=IntervalSchedule(every_s=0.1),
        command="true",
        catchup=Catchup.ALL,
        max_catchup=100_000,
    )
    backlog = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    sk = dep.keys_for(backlog)
    now = await redis.time_ms()
    # as if every node had been down for 3 hours: 108,000 ticks owed, 100,000 of them kept
    await redis.execute("ZADD", sk.timer, now - 3 * 3600 * 1000, backlog)
    await redis.execute("PUBLISH", dep.globals.wake_channel, sk.shard)
    start = await redis.time_ms()
    await trio.sleep(5)  # the paced catch-up runs for a measured 5 s
    end = await redis.time_ms()

    backlog_runs = await redis.execute("ZCARD", sk.runs_of(backlog))
    assert backlog_runs > 500, f"the backlog is draining ({backlog_runs} fired in 5 s)"
    skips = await redis.execute("ZRANGE", sk.skips(backlog), 0, -1)
    assert any(b"catchup_limit" in s for s in skips), skips
    lags = []
    for job_id in on_time:
        for run in await drive_list(listing.runs_page(dep, job_id, 100), redis):
            tick = run.scheduled_for.timestamp() * 1000
            if start + 500 <= tick <= end - 500:
                lags.append(run.created_at.timestamp() - run.scheduled_for.timestamp())
    assert len(lags) >= 40 * 6, len(lags)
    lags.sort()
    p99 = lags[int(len(lags) * 0.99) - 1]
    print(
        f"backlog fired {backlog_runs} in 5 s; on-time lag p50 {lags[len(lags) // 2]:.3f} s,"
        f" p99 {p99:.3f} s, max {lags[-1]:.3f} s"
    )
    assert p99 < 0.25 and lags[-1] < 0.5, (p99, lags[-1])
