"""Heavy HTTP requests never starve the shard actors that share the node's trio loop.

Measured on an earlier main, each of these outlasted the 5 s lease on the loop: the ticks
of a dense job (every tick built before the limit applied), a 10,000-tick cron backfill, a
dense 440-task DAG. Five at once must leave every shard's epoch and refusal counters as
they were: no ownership churn, no fenced write refused.
"""

from __future__ import annotations

import trio

from conftest import wait_until
from nodes import view
from shardsched.ops.deployment.cluster import ClusterView
from shardsched.shard.manager import ShardManager


def counters(v: ClusterView) -> list[tuple[int, int, int, int]]:
    return [(s.shard, s.epoch, s.refused_fire, s.refused_renew) for s in v.shards]


async def test_five_heavy_requests_at_once_leave_the_leases_alone(
    nursery, http, redis, dep
) -> None:
    # The node shares the loop with the API (as `shardsched node --http` does), with a
    # short lease so that a stall of 2 s shows as ownership churn.
    node = ShardManager(redis, dep, node_id="heavy", lease_ttl_s=2.0, renew_every_s=0.5)
    await nursery.start(node.run)
    # An old, dense job: ticks every 0.1 s for the last 24 hours (864,000 ticks).
    reply = await http.post(
        "/api/v1/jobs",
        json={"name": "dense", "command": "true", "schedule": {"type": "interval", "every_s": 0.1}},
    )
    dense = reply.json()["job_id"]
    sk = dep.keys_for(dense)
    now = await redis.time_ms()
    await redis.execute("HSET", sk.job(dense), "first", now - 24 * 3600 * 1000)
    await redis.execute("HSET", sk.job(dense), "status", "paused")  # no firing meanwhile
    await redis.execute("ZREM", sk.timer, dense)
    cron = await http.post(
        "/api/v1/jobs",
        json={
            "name": "cron",
            "command": "true",
            "schedule": {"type": "cron", "expression": "* * * * *"},
        },
    )
    cron_id = cron.json()["job_id"]
    # a dense DAG: 440 tasks, each depending on up to 20 before it
    tasks = [
        {
            "name": f"t{i}",
            "command": "true",
            "depends_on": [f"t{j}" for j in range(max(0, i - 20), i)],
        }
        for i in range(440)
    ]
    dag_body = {
        "name": "dense-dag",
        "schedule": {"type": "interval", "every_s": 3600},
        "tasks": tasks,
    }

    async def settled() -> bool:  # every shard owned by the node, its leases renewed
        return all(sh.owner == node.node_id for sh in (await view(redis, dep)).shards)

    await wait_until(settled, timeout=15)
    before = counters(await view(redis, dep))
    refused_before = node.refused_writes
    answers: dict[str, int] = {}
    started = trio.current_time()

    async def call(name: str, method: str, url: str, kw: dict) -> None:
        answers[name] = (await http.request(method, url, timeout=60, **kw)).status_code

    async with trio.open_nursery() as n:
        n.start_soon(call, "ticks", "GET", f"/api/v1/jobs/{dense}/ticks", {"params": {"limit": 50}})
        n.start_soon(
            call,
            "ticks-window",
            "GET",
            f"/api/v1/jobs/{dense}/ticks",
            {"params": {"limit": 1000, "from": "2000-01-01T00:00:00Z"}},
        )
        window = {
            "start": "2026-01-01T00:00:00Z",
            "end": "2026-01-07T22:00:00Z",
            "max_concurrent": 1,
        }
        n.start_soon(call, "backfill", "POST", f"/api/v1/jobs/{cron_id}/backfill", {"json": window})
        n.start_soon(call, "dag", "POST", "/api/v1/dags", {"json": dag_body})
        n.start_soon(
            call,
            "preview",
            "POST",
            "/api/v1/schedules/preview",
            {
                "json": {
                    "schedule": {
                        "type": "cron",
                        "expression": "* * * * *",
                        "timezone": "Europe/Berlin",
                    },
                    "count": 1000,
                }
            },
        )
    took = trio.current_time() - started
    print(answers, f"{took:.2f} s")
    assert answers["ticks"] == 200 and answers["ticks-window"] == 200, answers
    assert answers["backfill"] in (202, 422), answers  # 422 when the window is too big
    assert answers["dag"] == 201 and answers["preview"] == 200, answers
    rounds = node.lease_rounds

    async def two_rounds_later() -> bool:  # one whole lease round after the load
        return node.lease_rounds >= rounds + 2

    await wait_until(two_rounds_later, timeout=10)
    assert counters(await view(redis, dep)) == before
    assert node.refused_writes == refused_before
