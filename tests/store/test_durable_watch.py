"""A process follows the durable mode as stored now (store/durable_watch.py): a worker
that opened the deployment before a node set the mode waited for no replica at all, for
as long as it ran (the nemesis, #53)."""

from __future__ import annotations

import trio

from conftest import wait_until
from shardsched import ops
from shardsched.store.drive import drive_async
from shardsched.store.durable_watch import follow_durability
from shardsched.store.redis import Redis, RedisNotDurable


async def test_a_mode_set_after_the_process_opened_the_deployment_is_taken(
    redis_server, namespace
) -> None:
    """On a server with no replica, a write waits for one only once the mode is on."""
    client = Redis(redis_server.url, size=2)
    other = Redis(redis_server.url, size=1)
    try:
        dep = await drive_async(ops.open_deployment(namespace, 4), client)
        assert dep.durable is None
        key = f"{namespace}:probe"

        async def refused() -> bool:
            try:
                await client.execute("SET", key, "x")
            except RedisNotDurable:
                return True
            return False

        async def accepted() -> bool:
            return not await refused()

        async with trio.open_nursery() as nursery:
            await nursery.start(follow_durability, client, dep, 0.05)
            assert await accepted()
            await other.execute("HSET", dep.globals.meta, "durable", "1:100")  # a node's
            await wait_until(refused, timeout=10)
            await other.execute("HSET", dep.globals.meta, "durable", "garbage")
            await trio.sleep(0.2)  # several polls: an unreadable value changes nothing
            assert await refused()
            await other.execute("HSET", dep.globals.meta, "durable", "0:100")  # off again
            await wait_until(accepted, timeout=10)
            nursery.cancel_scope.cancel()
    finally:
        await client.aclose()
        await other.aclose()
