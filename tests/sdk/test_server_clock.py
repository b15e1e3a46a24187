"""A bulk registration's later batches plan from one reading of the server's clock
(sdk/server_clock.py), advanced locally, instead of a TIME that waits behind the batch
Redis is running; the first fires it plans are the server's, as a TIME's would be."""

from __future__ import annotations

from types import SimpleNamespace

import redis as redis_py

from shardsched.core.models import CronSchedule, JobSpec
from shardsched.sdk import Client, server_clock
from shardsched.sdk.server_clock import ServerClock
from shardsched.store.calls import Call, server_ms

TIME = [Call(("TIME",))]


def test_a_lone_time_is_answered_from_a_fresh_reading_and_anything_else_is_asked(
    monkeypatch,
) -> None:
    asked: list[list[Call]] = []
    local = {"s": 1000.0}  # this process's monotonic clock, moved by the test
    monkeypatch.setattr(server_clock, "time", SimpleNamespace(monotonic=lambda: local["s"]))

    def execute(calls):
        asked.append(list(calls))
        return [[b"1700000000", b"250000"]] if calls == TIME else ["other"] * len(calls)

    clock = ServerClock(fresh_s=0.2)
    assert server_ms(clock.answer(TIME, execute)[0]) == 1_700_000_000_250
    later = server_ms(clock.answer(TIME, execute)[0])
    assert 1_700_000_000_250 <= later < 1_700_000_000_250 + 200
    assert asked == [TIME]  # the second was not asked
    other = [Call(("TIME",)), Call(("HGET", "k", "f"))]
    assert clock.answer(other, execute) == ["other", "other"]
    local["s"] += 0.25  # no longer fresh: asked again
    clock.answer(TIME, execute)
    assert asked == [TIME, other, TIME]


def test_bulk_first_fires_come_from_the_servers_clock(own_redis_server) -> None:
    r = redis_py.Redis.from_url(own_redis_server.url)
    client = Client(own_redis_server.url, "clocked")
    try:
        before = server_ms(r.time())
        every_minute = CronSchedule(expression="* * * * *")
        specs = [JobSpec(name=f"m{i}", schedule=every_minute, command="true") for i in range(3000)]
        created = client.add_jobs(specs, batch=100)  # 30 batches, 29 of them from the reading
        after = server_ms(r.time())
        fires = {round(c.next_run_at.timestamp() * 1000) for c in created if c.next_run_at}
        assert len(created) == 3000 and len(fires) in (1, 2)
        # each is the first minute after the server's clock while it was planned
        assert min(fires) == (before // 60_000 + 1) * 60_000
        assert max(fires) == (after // 60_000 + 1) * 60_000 or len(fires) == 1
    finally:
        client.close()
        r.close()
