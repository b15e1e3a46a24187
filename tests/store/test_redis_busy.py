"""A Redis busy with a long script: readiness says so (503 with a reason), never a 500;
and a runaway read-only script costs no shard its lease."""

from __future__ import annotations

import subprocess

import httpx
import trio

from conftest import RedisServer, admin_token, rounds_later, wait_until
from shardsched import ops
from shardsched.router.app import create_app
from shardsched.service import serve_http
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis

#: A read-only script that spins for ``ARGV[1]`` ms of the server's clock.
SPIN = (
    "#!lua flags=no-writes\n"
    "local t0 = redis.call('TIME') local e = 0 "
    "while e < tonumber(ARGV[1]) do local t = redis.call('TIME') "
    "e = (t[1] - t0[1]) * 1000 + (t[2] - t0[2]) / 1000 end return 1"
)


def spin(server: RedisServer, ms: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["redis-cli", "-p", str(server.port), "EVAL", SPIN, "0", str(ms)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


async def test_readyz_is_a_503_with_a_reason_while_redis_is_busy(
    nursery: trio.Nursery, own_redis_server: RedisServer
) -> None:
    redis = Redis(own_redis_server.url, size=4)
    await redis.execute("CONFIG", "SET", "busy-reply-threshold", "100")
    dep = await drive_async(ops.open_deployment("busy", 4), redis)
    binds = await nursery.start(serve_http, create_app(redis, dep), "127.0.0.1:0")
    headers = {"authorization": f"Bearer {await admin_token(redis, dep)}"}
    proc = spin(own_redis_server, 3000)
    try:
        async with httpx.AsyncClient(base_url=binds[0], headers=headers, timeout=10) as http:

            async def busy() -> httpx.Response | None:  # past the busy-reply threshold
                reply = await http.get("/readyz")
                return reply if reply.status_code == 503 else None

            ready = await wait_until(busy, timeout=5)
            assert "BUSY" in ready.json()["error"]["message"]
            jobs = await http.get("/api/v1/jobs")
            assert jobs.status_code == 503, jobs.text
            status = await http.get("/api/v1/status")
            assert status.status_code == 503, status.text
    finally:
        proc.communicate(timeout=10)
        await redis.aclose()


async def test_a_runaway_read_script_costs_no_shard_its_lease(
    nursery: trio.Nursery, own_redis_server: RedisServer
) -> None:
    """A 7 s read-only script (a runaway report, a user's loop): the owner hears BUSY
    after the busy-reply threshold (1 s, redis_server_args) and ends it with SCRIPT KILL,
    long before its 5 s leases could lapse; nothing changes hands."""
    redis = Redis(own_redis_server.url, size=4)
    dep = await drive_async(ops.open_deployment("runaway", 4), redis)
    node = ShardManager(redis, dep, node_id="owner")  # 5 s leases renewed every 2 s
    await nursery.start(node.run)

    async def all_owned() -> bool:
        return len(node.leases) == 4

    await wait_until(all_owned)
    before = dict(node.leases)
    started = trio.current_time()
    proc = spin(own_redis_server, 7000)
    try:
        said, _ = await trio.to_thread.run_sync(proc.communicate)
        assert trio.current_time() - started < 5, "the script ran on: nobody ended it"
        assert b"SCRIPT KILL" in said, said  # ERR ... Script killed by user with SCRIPT KILL
        await rounds_later(lambda: node.lease_rounds, 3)  # past a lease length: a lapse shows
        assert node.leases == before, "a shard changed hands"
        epochs = [await redis.execute("GET", dep.shard(s).epoch) for s in range(4)]
        assert [int(e) for e in epochs] == [before[s] for s in range(4)]
        assert node.refused_writes == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        await redis.aclose()
