"""Stable jitter end to end, on a real node and worker: a job with ``spread_s`` runs each
tick at its own offset, under run ids keyed by the nominal tick; an ``H`` cron keeps its
``H`` in the job and fires on the value it stands for; the audit stays clean through
both, and through a change of spread."""

from __future__ import annotations

import collections
from datetime import datetime

import pytest

from conftest import wait_until
from shardsched import RunNotFound, ops
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import offset_ms, resolve_h
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.store.drive import drive_async


def _ms(text: str) -> int:
    return to_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


async def _runs(http, job_id: str, n: int) -> list[dict]:
    async def enough() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return sum(r["state"] == "succeeded" for r in runs) >= n

    await wait_until(enough, timeout=30)
    return (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]


async def _clean_ticks(http, job_id: str) -> list[dict]:
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    outcomes = {t["outcome"] for t in ticks}
    assert outcomes <= {"fired", "pending"}, ticks
    return ticks


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_a_spread_job_runs_each_tick_at_its_offset_under_its_nominal_run_id(
    node, worker, http
) -> None:
    body = {
        "name": "spread",
        "command": "true",
        "schedule": {"type": "interval", "every_s": 2},
        "spread_s": 1.8,
    }
    created = (await http.post("/api/v1/jobs", json=body)).json()
    job_id = created["job_id"]
    off = offset_ms(job_id, 1.8)
    job = (await http.get(f"/api/v1/jobs/{job_id}")).json()
    assert job["spread_s"] == 1.8
    runs = await _runs(http, job_id, 3)
    fired = [r for r in runs if r["state"] == "succeeded"]
    for run in fired:
        tick = _ms(run["scheduled_for"])
        assert run["run_id"] == f"{job_id}:{tick}:1"  # keyed by the nominal tick
        assert _ms(run["planned_for"]) - tick == off  # run at the job's own offset
        assert 0 <= _ms(run["created_at"]) - _ms(run["planned_for"]) < 500
    ticks = await _clean_ticks(http, job_id)
    done = [t for t in ticks if t["outcome"] == "fired"]
    assert len(done) >= 3 and all(_ms(t["planned"]) - _ms(t["tick"]) == off for t in done)
    assert all(t["lag_s"] < 0.5 for t in done), done  # late from its planned time, not the tick

    # a new spread moves the offset: replanned, nothing run twice, the audit clean
    patched = await http.patch(f"/api/v1/jobs/{job_id}", json={"spread_s": 0.5})
    assert patched.status_code == 200, patched.text
    before = len(fired)
    runs = await _runs(http, job_id, before + 2)
    ids = [r["run_id"] for r in runs]
    assert len(ids) == len(set(ids))
    new_off = offset_ms(job_id, 0.5)
    latest = runs[0]
    assert _ms(latest["planned_for"]) - _ms(latest["scheduled_for"]) == new_off
    await _clean_ticks(http, job_id)
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_an_h_cron_keeps_its_h_and_fires_on_what_it_stands_for(node, http) -> None:
    body = {
        "name": "hourly-h",
        "command": "true",
        "schedule": {"type": "cron", "expression": "H * * * *"},
    }
    created = (await http.post("/api/v1/jobs", json=body)).json()
    job = (await http.get(f"/api/v1/jobs/{created['job_id']}")).json()
    assert job["schedule"]["expression"] == "H * * * *"  # the spec as given
    minute = int(resolve_h("H * * * *", job["job_id"]).split()[0])
    assert datetime.fromisoformat(job["next_run_at"].replace("Z", "+00:00")).minute == minute
    again = (await http.post("/api/v1/jobs", json={**body, "name": "hourly-h2"})).json()
    other = (await http.get(f"/api/v1/jobs/{again['job_id']}")).json()
    other_minute = int(resolve_h("H * * * *", other["job_id"]).split()[0])
    assert datetime.fromisoformat(other["next_run_at"].replace("Z", "+00:00")).minute == (
        other_minute
    )
    for bad, field in [
        ("H(0-99) * * * *", "$.schedule.expression"),
        ("H/0 * * * *", "$.schedule.expression"),
    ]:
        reply = await http.post(
            "/api/v1/jobs", json={**body, "schedule": {"type": "cron", "expression": bad}}
        )
        assert reply.status_code == 422, reply.text
        assert reply.json()["error"]["details"]["field"] == field
    reply = await http.post("/api/v1/jobs", json={**body, "spread_s": 86401})
    assert reply.status_code == 422 and "spread_s" in reply.text


@pytest.mark.slow  # seconds of real firing; CI's slow step runs it
async def test_a_spread_burst_fires_every_job_once_flat_over_the_spread(
    node, worker, http, redis, dep
) -> None:
    """200 jobs whose nominal tick is one instant, spread_s 3: their runs are created over
    three seconds, not on one, each exactly once, each at its own planned time."""
    start = from_ms(await redis.time_ms() + 2000)
    every = IntervalSchedule(every_s=3600, start_at=start)
    specs = [JobSpec(name=f"b{i}", command="true", schedule=every, spread_s=3) for i in range(200)]
    created = await drive_async(ops.create_jobs(dep, specs), redis)
    ids = {c.job_id for c in created}
    planned = [to_ms(c.next_run_at) - to_ms(start) for c in created if c.next_run_at]
    assert sorted(planned) == sorted(offset_ms(j, 3) for j in ids)

    tick = to_ms(start)

    async def runs() -> list:
        found = []
        for job_id in ids:  # keyed by the nominal tick: <job>:<tick>:1
            try:
                found.append(await drive_async(ops.get_run(dep, f"{job_id}:{tick}:1"), redis))
            except RunNotFound:
                pass
        return found

    async def all_ran() -> bool:
        return len(await runs()) == 200

    await wait_until(all_ran, timeout=30)
    mine = await runs()
    assert {r.scheduled_for for r in mine} == {start}  # one nominal tick
    for job_id in ids:  # and no other run of any of them
        page = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        assert len(page) == 1, page
    made = sorted(to_ms(r.created_at) - to_ms(start) for r in mine)
    assert made[-1] - made[0] > 2000  # over the spread
    per_second = collections.Counter(m // 1000 for m in made)
    assert max(per_second.values()) < 200 * 0.5, per_second
    for r in mine:
        assert r.planned_for is not None
        assert 0 <= to_ms(r.created_at) - to_ms(r.planned_for) < 500
