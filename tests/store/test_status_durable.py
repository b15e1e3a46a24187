"""``status`` (API, CLI) says the durable mode as stored: set by a node, turned off."""

from __future__ import annotations

from shardsched import ops
from shardsched.cli.status import render
from shardsched.ops.deployment.status import status_view
from shardsched.store.deployment import Durability
from shardsched.store.drive import drive_async


async def test_status_says_the_durable_mode(redis, namespace) -> None:
    dep = await drive_async(ops.open_deployment(namespace, 4), redis)
    st = await drive_async(status_view(dep), redis)
    assert (st.durable_replicas, st.durable_timeout_ms) == (0, 0)
    assert "durable mode: off" in render(st)
    await drive_async(ops.open_deployment(namespace, 4, durable=Durability(2, 750)), redis)
    st = await drive_async(status_view(dep), redis)
    assert (st.durable_replicas, st.durable_timeout_ms) == (2, 750)
    assert "every write waits for 2 replica(s), up to 750 ms" in render(st)
    await redis.execute("HSET", dep.globals.meta, "durable", "not a mode")  # a hand edit
    assert (await drive_async(status_view(dep), redis)).durable_replicas == 0
