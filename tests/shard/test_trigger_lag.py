"""Each tick fires on its own time, also when its shard's due batch holds later ticks: the
owner reads due jobs up to 300 ms ahead to plan them, and used to fire the whole batch as
its *last* tick fell due, so jobs whose phases are spread over the second fired up to
300 ms late (the steady bench's p99 went from 3 ms to 250 ms, unnoticed)."""

from __future__ import annotations

import statistics
from datetime import timedelta

import trio

from nodes import fired_at_least
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops.history.audit import job_ticks
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis


async def test_spread_phases_on_one_shard_each_fire_on_their_tick(
    nursery: trio.Nursery, redis: Redis, namespace: str
) -> None:
    dep = await drive_async(ops.open_deployment(namespace, 1), redis)  # one shard: one batch
    start = from_ms(await redis.time_ms() + 1500)
    specs = [
        JobSpec(
            name=f"phase-{i}",
            command="true",
            schedule=IntervalSchedule(every_s=1, start_at=start + timedelta(milliseconds=70 * i)),
        )
        for i in range(4)
    ]
    created = await drive_async(ops.create_jobs(dep, specs), redis)
    manager = ShardManager(redis, dep, node_id="lag-node", renew_every_s=0.5)
    await nursery.start(manager.run)
    await fired_at_least(redis, dep, [j.job_id for j in created], 4 * 4)  # four rounds
    for job in created:
        ticks = await drive_async(job_ticks(dep, job.job_id, None, None, 100), redis)
        lags = [t.lag_s for t in ticks.ticks if t.lag_s is not None]
        assert len(lags) >= 3, ticks
        # the earliest phase waited for the latest one: ~210 ms; on time it is a few ms
        assert statistics.median(lags) < 0.1, (job.job_id, lags)
