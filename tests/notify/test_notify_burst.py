"""A burst of 25,000 failures in one second makes a handful of messages, not 25,000
(issue #32), with every failure counted in them exactly once. Slow: a minute."""

from __future__ import annotations

import time

import pytest
import trio

from conftest import wait_until
from notify.receiver import receiver
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.sdk import Client
from shardsched.worker.handlers import HandlerContext, handler

N = 25_000


@handler("test-notify-burst-fail", inline=True)
def _fail(ctx: HandlerContext) -> None:
    raise RuntimeError("down")


@pytest.mark.slow
@pytest.mark.serial  # a second's failures must land in one window to coalesce
async def test_25000_failures_in_a_second_make_a_handful_of_messages(
    node, worker, http, redis, redis_server, dep
) -> None:
    with receiver() as rec:
        await http.put("/api/v1/notifications/channels/burst",
                       json={"kind": "webhook", "url": rec.url, "max_per_minute": 5})  # fmt: skip
        made = await http.post("/api/v1/notifications/rules",
                               json={"events": ["failed", "dead_letter"], "channels": ["burst"],
                                     "group_s": 5})  # fmt: skip
        assert made.status_code == 201
        now_ms = await redis.time_ms()
        at = from_ms(now_ms - now_ms % 1000 + 5000)  # a second boundary, 4-5 s ahead

        def register() -> None:
            command = "handler:test-notify-burst-fail"
            specs = [JobSpec(name=f"b{i}", schedule=OnceSchedule(at=at), command=command)
                     for i in range(N)]  # fmt: skip
            with Client(redis_server.url, dep.namespace) as client:
                client.add_jobs(specs)

        await trio.to_thread.run_sync(register)
        boundary = at.timestamp()

        async def all_told() -> bool:
            return sum(b["total"] for b in rec.bodies()) >= N

        await wait_until(all_told, timeout=120)
        took = time.time() - boundary
        bodies = rec.bodies()
        assert len(bodies) <= 3, [b["total"] for b in bodies]
        assert sum(b["total"] for b in bodies) == N  # each failure once
        print(
            f"\n25,000 failures: {len(bodies)} message(s), the last {took:.1f} s after the boundary"
        )
