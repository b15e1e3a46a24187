"""The durable mode (issue #53): a round trip is acknowledged only once the replicas have
every write the primary made before its end. With the replica stopped, calls run on the
primary but are answered "not durable"; a worker then executes nothing (a claim the
replicas do not have may be lost in a failover, and the run executed twice), and runs
what it claimed once the replica is back, each once by the jobs' own record."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import AsyncIterator

import pytest
import trio

from conftest import wait_until
from nodes import fired_at_least, settled_audit
from sentinels import sentinel_group
from shardsched import IntervalSchedule, JobSpec, ops
from shardsched.runtime.sentinel_group import SentinelGroup
from shardsched.shard.manager import ShardManager
from shardsched.store.deployment import Durability
from shardsched.store.drive import drive_async
from shardsched.store.redis import Durable, RedisNotDurable, connect, use_durability
from shardsched.worker.handlers import HandlerContext, handler
from shardsched.worker.worker import Worker
from waits import server_clock_passes

pytestmark = pytest.mark.processes
EXECUTED: list[str] = []  #: the jobs' own record: one entry per execution


@handler("ha-durable-record", inline=True)
def record(ctx: HandlerContext) -> None:
    EXECUTED.append(ctx.run_id)


@pytest.fixture
async def group(tmp_path) -> AsyncIterator[SentinelGroup]:  # type: ignore[no-untyped-def]
    async for g in sentinel_group(tmp_path / "ha"):
        yield g


async def test_a_call_the_replica_does_not_have_is_not_acknowledged(
    group: SentinelGroup,
) -> None:
    client = connect(group.url, size=2, retry_for=10)
    client.set_durability(Durable(1, 300, "t:durable"))
    (replica,) = group.replica_ports
    try:
        await client.execute("SET", "k", "1")  # acknowledged: the replica has it
        os.kill(group.procs[replica].pid, signal.SIGSTOP)
        with pytest.raises(RedisNotDurable, match="0 of 1 replicas"):
            await client.execute("SET", "k", "2")
        client.set_durability(None)
        assert await client.execute("GET", "k") == b"2"  # it ran: it is the replica that lags
        client.set_durability(Durable(1, 300, "t:durable"))
        os.kill(group.procs[replica].pid, signal.SIGCONT)
        with trio.fail_after(10):
            while True:  # until the replica caught up with the backlog
                try:
                    await client.execute("GET", "k")
                    break
                except RedisNotDurable:
                    await trio.sleep(0.1)  # the replica catching up: looked at again
    finally:
        os.kill(group.procs[replica].pid, signal.SIGCONT)
        await client.aclose()


async def test_a_worker_executes_nothing_the_replicas_do_not_have(
    group: SentinelGroup, namespace: str
) -> None:
    EXECUTED.clear()
    redis = connect(group.url, size=8, retry_for=30)
    dep = await drive_async(ops.open_deployment(namespace, 4, None, Durability(1, 300)), redis)
    assert dep.durable == Durability(1, 300)
    use_durability(redis, dep)
    (replica,) = group.replica_ports
    try:
        async with trio.open_nursery() as nursery:
            node = ShardManager(redis, dep, node_id="d-node", renew_every_s=0.5, lease_ttl_s=30)
            await nursery.start(node.run)
            worker = Worker(redis, dep, worker_id="d-worker", concurrency=8)
            await nursery.start(worker.run)
            specs = [
                JobSpec(name=f"d{i}", schedule=IntervalSchedule(every_s=0.5),
                        command="handler:ha-durable-record")
                for i in range(10)
            ]  # fmt: skip
            ids = [c.job_id for c in await drive_async(ops.create_jobs(dep, specs), redis)]
            await wait_until(lambda: trio.to_thread.run_sync(lambda: len(EXECUTED) >= 20))
            os.kill(group.procs[replica].pid, signal.SIGSTOP)
            # a claim acknowledged just before the stop executes at once (inline); one in
            # flight is answered within the 300 ms WAIT
            stopped_ms = await redis.time_ms()
            await server_clock_passes(redis, stopped_ms + 500)  # past any such WAIT
            before = len(EXECUTED)
            # 2 s of ticks come due with the replica stopped: nothing may execute
            start = await redis.primary()
            await server_clock_passes(redis, stopped_ms + 2500)
            assert len(EXECUTED) == before, EXECUTED[before:]
            assert start is await redis.primary()
            os.kill(group.procs[replica].pid, signal.SIGCONT)
            fired = await fired_at_least(redis, dep, ids, len(EXECUTED) + 30)
            await wait_until(lambda: trio.to_thread.run_sync(lambda: len(EXECUTED) >= fired))
            report = await settled_audit(redis, dep, timeout=60)
            assert report.ok, report
            nursery.cancel_scope.cancel()
        twice = {run: n for run, n in Counter(EXECUTED).items() if n > 1}
        assert not twice, twice
    finally:
        os.kill(group.procs[replica].pid, signal.SIGCONT)
        await redis.aclose()


async def test_a_replica_is_named_for_what_it_is(group: SentinelGroup) -> None:
    """Pointed at a replica (a name that still resolves to a demoted primary): a namespace
    it has never seen is a clear refusal, not a TypeError; a durable write is READONLY,
    not a garbled WAIT error."""
    from shardsched.core.errors import RedisUnavailable
    from shardsched.store.redis import Redis, RedisBusyError

    (replica,) = group.replica_ports
    client = Redis(group.server_url(replica), size=1)
    try:
        with pytest.raises(RedisUnavailable, match=r"refuses to make one.*a replica"):
            await drive_async(ops.open_deployment("never-seen", None), client)
        client.set_durability(Durable(1, 300, "t:durable"))
        with pytest.raises(RedisBusyError, match="READONLY") as caught:
            await client.execute("SET", "k", "v")
        assert "of 1 replicas" not in str(caught.value)
    finally:
        await client.aclose()


async def test_clients_in_the_durable_mode_with_the_replica_stopped(
    group: SentinelGroup, namespace: str, nursery: trio.Nursery
) -> None:
    """Reads answer at once through the Redis SDK; a write through it raises Unreachable
    (made, may be lost); the API answers 503 ``not_durable``, which the HTTP SDK raises as
    Unreachable too."""
    import httpx

    from conftest import admin_token
    from shardsched import Client
    from shardsched.core.errors import Unreachable
    from shardsched.router.app import create_app
    from shardsched.service import serve_http

    redis = connect(group.url, size=4, retry_for=10)
    dep = await drive_async(ops.open_deployment(namespace, 4, None, Durability(1, 300)), redis)
    use_durability(redis, dep)
    binds = await nursery.start(serve_http, create_app(redis, dep), "127.0.0.1:0")
    headers = {"authorization": f"Bearer {await admin_token(redis, dep)}"}
    sdk = await trio.to_thread.run_sync(Client, group.url, namespace)
    (replica,) = group.replica_ports
    spec = JobSpec(name="x", schedule=IntervalSchedule(every_s=3600), command="true")
    try:
        os.kill(group.procs[replica].pid, signal.SIGSTOP)
        with trio.fail_after(0.9):  # under the 300 ms WAIT it would otherwise wait, and more
            await trio.to_thread.run_sync(sdk.list_jobs)
        with pytest.raises(Unreachable, match="replicas acknowledged"):
            await trio.to_thread.run_sync(sdk.add_job, spec)
        async with httpx.AsyncClient(base_url=binds[0], headers=headers, timeout=10) as http:
            resp = await http.post("/api/v1/jobs", json={"name": "y", "command": "true",
                                   "schedule": {"type": "interval", "every_s": 3600}})  # fmt: skip
            assert resp.status_code == 503 and resp.json()["error"]["code"] == "not_durable"
            assert (await http.get("/api/v1/jobs")).status_code == 200  # reads still answer
    finally:
        os.kill(group.procs[replica].pid, signal.SIGCONT)
        await trio.to_thread.run_sync(sdk.close)
        await redis.aclose()
