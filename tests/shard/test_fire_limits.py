"""A schedule's window and its number of fires: ``starts_at``/``ends_at`` bound its
ticks, ``max_fires`` stops it after that many (counted by fire.lua as it makes each run,
so no owner's crash can run one too many); the job says why it fires no more, and how
many it has left, and the audit expects nothing of it past its end."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import trio

from conftest import wait_until
from shardsched.core.instants import from_ms


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def _job(http, **body) -> dict:
    spec = {"name": "limited", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    reply = await http.post("/api/v1/jobs", json={**spec, **body})
    assert reply.status_code == 201, reply.text
    return (await http.get(f"/api/v1/jobs/{reply.json()['job_id']}")).json()


async def _runs(http, job_id: str) -> list[dict]:
    return (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]


@pytest.mark.slow  # seconds of real firing; CI's slow step runs it
async def test_max_fires_stops_the_job_and_says_so(node, worker, http) -> None:
    job = await _job(http, max_fires=3)
    job_id = job["job_id"]
    assert job["max_fires"] == 3 and job["fires_left"] == 3

    async def stopped() -> bool:
        return (await http.get(f"/api/v1/jobs/{job_id}")).json()["no_next_run"] == "max_fires"

    await wait_until(stopped, timeout=20)
    await trio.sleep(2)  # nothing more comes
    runs = await _runs(http, job_id)
    assert len(runs) == 3, runs
    now = (await http.get(f"/api/v1/jobs/{job_id}")).json()
    assert now["fires_left"] == 0 and now["next_run_at"] is None and now["status"] == "active"
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    assert [t["outcome"] for t in ticks] == ["fired"] * 3  # nothing owed after its last

    raised = await http.patch(f"/api/v1/jobs/{job_id}", json={"max_fires": 5})
    assert raised.status_code == 200 and raised.json()["fires_left"] == 2
    await wait_until(stopped, timeout=20)
    await trio.sleep(1.5)  # nothing more comes: three ticks past the fifth fire
    assert len(await _runs(http, job_id)) == 5
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_a_window_bounds_the_ticks(node, worker, http, redis) -> None:
    now = from_ms(await redis.time_ms())
    starts, ends = now + timedelta(seconds=2), now + timedelta(seconds=4.5)
    job = await _job(http, starts_at=starts.isoformat(), ends_at=ends.isoformat())
    job_id = job["job_id"]
    assert _at(job["next_run_at"]) == starts  # its phase: the window's start
    assert _at(job["starts_at"]) == starts and _at(job["ends_at"]) == ends

    async def ended() -> bool:
        got = (await http.get(f"/api/v1/jobs/{job_id}")).json()
        return got["no_next_run"] == "window_ended"

    await wait_until(ended, timeout=20)
    runs = await _runs(http, job_id)
    ticks = sorted(_at(r["scheduled_for"]) for r in runs)
    assert ticks == [starts + timedelta(seconds=s) for s in (0, 1, 2)], ticks
    bad = await http.post(
        "/api/v1/jobs",
        json={
            "name": "backwards",
            "command": "true",
            "schedule": {"type": "interval", "every_s": 1},
            "starts_at": ends.isoformat(),
            "ends_at": starts.isoformat(),
        },
    )
    assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "$.ends_at"
    cron = await _job(
        http,
        name="cron-window",
        schedule={"type": "cron", "expression": "* * * * *"},
        starts_at="2030-01-01T00:00:30Z",
    )
    assert cron["next_run_at"] == "2030-01-01T00:01:00Z"
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_jobs_sharing_a_schedule_object_keep_their_own_limits(redis, dep) -> None:
    """A bulk registration shares one timing between jobs alike; jobs whose schedule is
    the same object but whose limits differ each get their own."""
    import msgspec

    from shardsched import ops
    from shardsched.core.models import IntervalSchedule, JobSpec, Timing
    from shardsched.store.drive import drive_async

    every = IntervalSchedule(every_s=60)
    specs = [
        JobSpec(name="a", command="true", schedule=every, max_fires=2),
        JobSpec(name="b", command="true", schedule=every, max_fires=5, start_deadline_s=9),
        JobSpec(name="c", command="true", schedule=IntervalSchedule(every_s=60), max_fires=2),
    ]
    made = await drive_async(ops.create_jobs(dep, specs), redis)
    timings = []
    for job in made:
        raw = await redis.execute("HGET", dep.keys_for(job.job_id).job(job.job_id), "timing")
        timings.append(msgspec.json.decode(raw, type=Timing))
    assert [t.max_fires for t in timings] == [2, 5, 2]
    assert [t.start_deadline_ms for t in timings] == [None, 9000, None]


async def test_changing_a_schedule_never_runs_a_fired_tick_again(node, worker, http, redis) -> None:
    """dagster#13597: a new schedule whose ticks include ones already fired (here a phase
    set in the past, every fired tick on it) runs none of them again: the timer starts
    from now, and the run ids are the ticks'."""
    now = from_ms(await redis.time_ms())
    start = (now - timedelta(seconds=30)).isoformat()
    job = await _job(http, schedule={"type": "interval", "every_s": 1, "start_at": start})
    job_id = job["job_id"]

    async def fired_three() -> list[dict] | None:
        runs = await _runs(http, job_id)
        return runs if len(runs) >= 3 else None

    before = {r["run_id"] for r in await wait_until(fired_three, timeout=20)}
    changed = await http.patch(
        f"/api/v1/jobs/{job_id}",
        json={"schedule": {"type": "interval", "every_s": 0.5, "start_at": start}},
    )
    assert changed.status_code == 200, changed.text
    changed_at = from_ms(await redis.time_ms())

    async def fired_more() -> list[dict] | None:
        runs = await _runs(http, job_id)
        return runs if len(runs) >= len(before) + 4 else None

    after = await wait_until(fired_more, timeout=20)
    new = [r for r in after if r["run_id"] not in before]
    assert all(_at(r["scheduled_for"]) > changed_at - timedelta(seconds=0.6) for r in new), new
    assert len({r["scheduled_for"] for r in after}) == len(after)  # no tick twice
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["duplicated"] == 0 and audit["missing"] == 0, audit
