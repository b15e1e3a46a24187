"""The service on a primary behind Sentinel (issue #53): the skeleton's end-to-end tests
unchanged on a ``redis+sentinel://`` URL (the SDK's included), and a node, a worker, the
SDK and the CLI through a primary killed -9: firing goes on on the promoted replica,
``/readyz`` names it, the audit finds every tick once."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import test_end_to_end as e2e
import trio

import waits
from conftest import admin_token, child_env, shardsched_cmd
from nodes import fired_more, settled_audit
from sentinels import new_primary
from shardsched import Client, IntervalSchedule, JobSpec, ops
from shardsched.runtime.redis_server import stop_process
from shardsched.runtime.sentinel_group import SentinelGroup, start_sentinel_group
from shardsched.service import run_node, run_worker
from shardsched.store.redis import SentinelRedis, connect
from shardsched.worker.worker import Worker

pytestmark = pytest.mark.processes


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    root = tmp_path_factory.mktemp("sentinel")
    g = trio.run(start_sentinel_group, root, 1, 3, 1000, waits.NOTIFY_ARGS)
    urls = [g.server_url(p) for p in (g.primary_port, *g.replica_ports)]
    for url in urls:
        waits.watch(url)
    yield g
    for url in urls:
        waits.unwatch(url)

    async def stop_all() -> None:
        for proc in g.procs.values():
            if proc.returncode is None:
                os.kill(proc.pid, signal.SIGCONT)  # a stopped one ends too
            await stop_process(proc, grace=2)

    trio.run(stop_all)


class _Server:
    def __init__(self, url: str) -> None:
        self.url = url


@pytest.fixture
def redis_server(group: SentinelGroup) -> _Server:
    return _Server(group.url)


@pytest.fixture
async def redis(group: SentinelGroup) -> AsyncIterator[SentinelRedis]:
    client = connect(group.url, size=8, retry_for=30)
    async with trio.open_nursery() as nursery:
        await nursery.start(client.follow)
        yield client
        nursery.cancel_scope.cancel()
    await client.aclose()


# The skeleton's end-to-end tests, unchanged, on the sentinels' primary.
test_once_job_fires_on_time_and_output_is_readable = (
    e2e.test_once_job_fires_on_time_and_output_is_readable
)
test_interval_job_fires_once_per_tick = e2e.test_interval_job_fires_once_per_tick
test_manual_trigger_runs_now = e2e.test_manual_trigger_runs_now
test_pause_resume_delete_keep_history = e2e.test_pause_resume_delete_keep_history
test_healthz_and_readyz = e2e.test_healthz_and_readyz
test_sdk_registers_and_reads_through_the_same_scripts = (
    e2e.test_sdk_registers_and_reads_through_the_same_scripts
)


async def test_a_primary_killed_while_jobs_fire(
    group: SentinelGroup, redis: SentinelRedis, dep: ops.Deployment, tmp_path: Path
) -> None:
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: run_node(
                redis, dep, http="127.0.0.1:0", node_id="ha-node", lease_ttl_s=3.0,
                renew_every_s=0.5, task_status=task_status,
            )
        )  # fmt: skip
        worker = Worker(redis, dep, worker_id="ha-worker", concurrency=16)
        await nursery.start(run_worker, worker)
        # registered through the SDK (redis-py's Sentinel)
        client = await trio.to_thread.run_sync(Client, group.url, dep.namespace)
        specs = [
            JobSpec(name=f"ha{i}", schedule=IntervalSchedule(every_s=0.5), command="handler:noop")
            for i in range(50)
        ]
        ids = [c.job_id for c in await trio.to_thread.run_sync(client.add_jobs, specs)]
        await fired_more(redis, dep, ids, 2 * 50)
        old = group.primary_port
        group.procs[old].kill()
        await group.procs[old].wait()
        new = await new_primary(group, old)
        await fired_more(redis, dep, ids, 4 * 50, timeout=60)  # on the new primary
        assert redis.url.port == new
        headers = {"authorization": f"Bearer {await admin_token(redis, dep)}"}
        async with httpx.AsyncClient(base_url=binds[0], headers=headers) as http:
            ready = (await http.get("/readyz")).json()
        assert f"127.0.0.1:{new}" in ready["redis"] and "sentinel" in ready["redis"], ready
        # the SDK follows too (its first call after the failover finds the new primary)
        job = await trio.to_thread.run_sync(client.get_job, ids[0])
        assert job.name == "ha0"
        await trio.to_thread.run_sync(client.close)
        # and the CLI
        done = await trio.run_process(
            shardsched_cmd("status", "--redis", group.url, "--namespace", dep.namespace),
            capture_stdout=True, capture_stderr=True, check=False, env=child_env(),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        report = await settled_audit(redis, dep, timeout=60)
        assert report.ok, report
        nursery.cancel_scope.cancel()
    # the old primary back, as a replica of the new one (the sentinels reconfigure it)
    await group.start_server(old, replica_of=new)
