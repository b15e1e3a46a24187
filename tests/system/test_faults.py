"""Fault tests with real processes: kill -9 the node mid-burst, kill -9 Redis (AOF) mid-run."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter

import pytest
import trio

from conftest import RedisServer, child_env, drive_list, shardsched_cmd, wait_until
from shardsched import IntervalSchedule, JobSpec, OnceSchedule, ops
from shardsched.core.instants import from_ms
from shardsched.ops import listing
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis
from shardsched.worker.worker import Worker


def start_node(url: str, namespace: str, node_id: str, shards: int, log) -> subprocess.Popen:
    return subprocess.Popen(
        shardsched_cmd(
            "node",
            "--redis",
            url,
            "--namespace",
            namespace,
            "--node-id",
            node_id,
            "--shards",
            str(shards),
            "--no-http",
            "--lease-ttl",
            "2",
            "--renew-every",
            "0.5",
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=child_env(),
    )


async def stream_run_ids(redis: Redis, dep: ops.Deployment) -> Counter[str]:
    """Every run id appended to the ready streams (no worker runs, so none was removed)."""
    seen: Counter[str] = Counter()
    for shard in range(dep.n_shards):
        entries = await redis.execute("XRANGE", dep.shard(shard).ready, "-", "+")
        seen.update(fields[1].decode() for _eid, fields in entries)
    return seen


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_kill_9_node_mid_burst_fires_every_due_tick_exactly_once(
    redis, redis_server, dep, tmp_path
) -> None:
    # A burst of 16,000 due runs: once jobs registered with a past instant fire at once.
    specs = [
        JobSpec(name=f"j{i}", schedule=OnceSchedule(at=from_ms(0)), command="true")
        for i in range(16_000)
    ]
    created = await drive_async(ops.create_jobs(dep, specs), redis)
    job_ids = [c.job_id for c in created]
    with (tmp_path / "node.log").open("wb") as log:
        first = start_node(redis_server.url, dep.namespace, "n1", dep.n_shards, log)
        try:

            async def firing_started() -> bool:
                # XLEN per shard is O(1): the poll must not slow the burst it watches.
                for shard in range(dep.n_shards):
                    if await redis.execute("XLEN", dep.shard(shard).ready):
                        return True
                return False

            await wait_until(firing_started, timeout=20)
            first.send_signal(signal.SIGKILL)
            first.wait()
            fired_at_kill = sum((await stream_run_ids(redis, dep)).values())
            assert fired_at_kill < len(job_ids), (
                "the burst finished before the kill: make it bigger"
            )
        finally:
            first.kill()
            first.wait()

        # A different node takes over once the dead node's leases lapse, and replays.
        second = start_node(redis_server.url, dep.namespace, "n2", dep.n_shards, log)
        try:

            async def caught_up() -> bool:
                return sum((await stream_run_ids(redis, dep)).values()) >= len(job_ids)

            await wait_until(caught_up, timeout=30)
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=10) == 0

    seen = await stream_run_ids(redis, dep)
    assert [rid for rid, n in seen.items() if n > 1] == []
    fired_jobs = {rid.split(":", 1)[0] for rid in seen}
    assert fired_jobs == set(job_ids), f"missing: {sorted(set(job_ids) - fired_jobs)[:5]}"
    for job_id in job_ids[:200]:
        runs = await redis.execute("ZRANGE", dep.keys_for(job_id).runs_of(job_id), 0, -1)
        assert len(runs) == 1, (job_id, runs)
    print(f"fired before the kill: {fired_at_kill}, in all: {sum(seen.values())}")
    assert sum(seen.values()) > fired_at_kill


async def test_node_and_worker_ride_out_a_redis_restart(own_redis_server: RedisServer) -> None:
    redis = Redis(own_redis_server.url, size=8, retry_for=30)
    try:
        dep = await drive_async(ops.open_deployment("restart", 4), redis)
        spec = JobSpec(name="tick", schedule=IntervalSchedule(every_s=0.5), command="true")
        job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id

        async def succeeded_after(t_ms: int) -> int:
            runs = await drive_list(listing.runs_page(dep, job_id, 200), redis)
            return sum(
                1 for r in runs if r.state == "succeeded" and r.scheduled_for > from_ms(t_ms)
            )

        async with trio.open_nursery() as nursery:
            manager = ShardManager(redis, dep, node_id="n", renew_every_s=0.5)
            await nursery.start(manager.run)
            await nursery.start(Worker(redis, dep, "w", concurrency=4, sweep_every_s=1).run)
            await wait_until(lambda: succeeded_after(0), timeout=10)

            own_redis_server.kill()  # kill -9: AOF with fsync always keeps every ack
            await trio.sleep(1.0)  # Redis stays down a second
            await trio.to_thread.run_sync(own_redis_server.start)
            restarted_ms = await redis.time_ms()

            async def three_more() -> bool:
                return await succeeded_after(restarted_ms) >= 3

            await wait_until(three_more, timeout=20)
            nursery.cancel_scope.cancel()

        runs = await drive_list(listing.runs_page(dep, job_id, 500), redis)
        ticks = [r.scheduled_for for r in runs]
        assert len(ticks) == len(set(ticks)), "a tick fired twice across the restart"
    finally:
        await redis.aclose()
