"""Liveness: an active job always has a next fire or a recorded reason why not. A timer
entry deleted behind the scheduler's back is found by its owner's sweep and put back as
a recorded decision (change log, metric), the job fires again, and the audit stays
clean; a job whose schedule is exhausted says so, and is left alone, as a paused one."""

from __future__ import annotations

import pytest
import trio

from conftest import wait_until


async def _job(http, **body) -> str:
    spec = {"name": "live", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    reply = await http.post("/api/v1/jobs", json={**spec, **body})
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def _runs(http, job_id: str) -> list[dict]:
    return (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 200})).json()["runs"]


@pytest.mark.slow  # seconds of real firing; CI's slow step runs it
async def test_a_timer_entry_deleted_behind_its_back_is_put_back(
    node, worker, http, redis, dep
) -> None:
    job_id = await _job(http)
    paused = await _job(http, name="paused")
    await http.patch(f"/api/v1/jobs/{paused}", json={"status": "paused"})
    once = await _job(http, name="once", schedule={"type": "once", "at": "2020-01-01T00:00:00Z"})
    sk = dep.keys_for(job_id)

    async def ran(n: int) -> bool:
        return sum(r["state"] == "succeeded" for r in await _runs(http, job_id)) >= n

    await wait_until(lambda: ran(2), timeout=20)
    await wait_until(lambda: ran_once(http, once), timeout=20)
    before = node.metrics.timer_repairs._value.get()
    await redis.execute("ZREM", sk.timer, job_id)  # behind the scheduler's back
    lost_at = len(await _runs(http, job_id))
    await trio.sleep(2.5)  # a few ticks go by with no entry

    async def repaired() -> bool:
        return await redis.execute("ZSCORE", sk.timer, job_id) is not None

    await wait_until(repaired, timeout=30)  # the sweep takes the held shards in turn
    assert node.metrics.timer_repairs._value.get() == before + 1
    changes = (await http.get(f"/api/v1/jobs/{job_id}/changes")).json()["changes"]
    assert changes[0]["action"] == "repair" and changes[0]["by"] == "scheduler", changes[0]
    assert "timer entry was missing" in changes[0]["detail"]
    await wait_until(lambda: ran(lost_at + 3), timeout=20)  # firing again, the lost ones too
    ids = [r["run_id"] for r in await _runs(http, job_id)]
    assert len(ids) == len(set(ids))

    # an exhausted schedule says why it has no next fire, and is not "repaired"; nor is a
    # paused job
    done = (await http.get(f"/api/v1/jobs/{once}")).json()
    assert done["status"] == "active" and done["next_run_at"] is None
    assert done["no_next_run"] == "exhausted"
    assert (await http.get(f"/api/v1/jobs/{job_id}")).json()["no_next_run"] is None
    passes = node.maintainer.timers.passes
    await wait_until(lambda: _at_least(node.maintainer.timers.passes, passes + 4), timeout=30)
    assert node.metrics.timer_repairs._value.get() == before + 1
    assert await redis.execute("ZSCORE", dep.keys_for(paused).timer, paused) is None
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def ran_once(http, job_id: str) -> bool:
    return any(r["state"] == "succeeded" for r in await _runs(http, job_id))


async def _at_least(value: int, n: int) -> bool:
    return value >= n
