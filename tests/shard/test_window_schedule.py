"""Run once per window: a window opens at each cron tick and lasts duration_s. Its one run
starts as early as a worker is free; a tick found late (its owner was down at the
opening) still fires while the window is open, once; a window that closed unseen is
skipped ``window_closed``; a run no worker started before the window closed is skipped
(``start_deadline``). Real node; the outage is made by setting the job's timer entry back
to an earlier opening behind the scheduler's back, as a node down then would have left it."""

from __future__ import annotations

import math

from conftest import wait_until
from shardsched.core.catchup import decide
from shardsched.core.models import Timing, WindowSchedule
from shardsched.core.schedule import next_fire_ms
from shardsched.worker.worker import Worker

MINUTE = 60_000


def test_a_window_fires_late_while_open_and_skips_once_closed() -> None:
    timing = Timing(schedule=WindowSchedule(cron="0 2 * * *", duration_s=4 * 3600))
    opens = 1_800_000_000_000 - 1_800_000_000_000 % 86_400_000 + 2 * 3_600_000  # 02:00Z
    nxt = lambda t: next_fire_ms(timing.schedule, t)  # noqa: E731
    late = decide(timing, opens, opens + 3 * 3_600_000, nxt)  # 05:00: still open
    assert late.fire == opens and late.skip is None
    closed = decide(timing, opens, opens + 5 * 3_600_000, nxt)  # 07:00: closed
    assert closed.fire is None and closed.skip is not None
    assert closed.skip.reason == "window_closed" and closed.new == opens + 86_400_000


async def _window_job(http, duration_s: float, name: str) -> str:
    body = {
        "name": name,
        "command": "true",
        "schedule": {"type": "window", "cron": "* * * * *", "duration_s": duration_s},
    }
    reply = await http.post("/api/v1/jobs", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def _set_back(redis, dep, job_id: str, now_ms: int) -> int:
    """The job's timer entry set to the last opening before now; returns that tick."""
    opened = now_ms // MINUTE * MINUTE
    sk = dep.keys_for(job_id)
    await redis.execute("ZADD", sk.timer, "XX", opened, job_id)
    await redis.execute("PUBLISH", dep.globals.wake_channel, sk.shard)
    return opened


async def _run(http, rid: str) -> dict | None:
    reply = await http.get(f"/api/v1/runs/{rid}")
    return reply.json() if reply.status_code == 200 else None


async def test_one_run_per_window_through_an_outage(node, http, redis, dep, nursery) -> None:
    now = await redis.time_ms()
    open_job = await _window_job(http, 3600, "open")
    closed_job = await _window_job(http, 5, "closed")
    since = (now - now // MINUTE * MINUTE) / 1000
    unstarted = await _window_job(http, math.ceil(since) + 2, "unstarted")
    opened = await _set_back(redis, dep, open_job, now)
    await _set_back(redis, dep, closed_job, now)
    await _set_back(redis, dep, unstarted, now)

    # no worker yet: the open window's run waits; the short one's window closes unstarted
    async def unstarted_skipped() -> bool:
        run = await _run(http, f"{unstarted}:{opened}:1")
        return run is not None and run["state"] == "skipped"

    await wait_until(unstarted_skipped, timeout=20)
    assert (await _run(http, f"{unstarted}:{opened}:1"))["reason"] == "start_deadline"
    if since > 5:  # the closed one's window (5 s) had closed before it was seen
        assert await _run(http, f"{closed_job}:{opened}:1") is None
        ticks = (await http.get(f"/api/v1/jobs/{closed_job}/stats")).json()
        skips = await redis.execute("ZRANGE", dep.keys_for(closed_job).skips(closed_job), 0, -1)
        assert any(b"window_closed" in s for s in skips), (skips, ticks)
    # a worker comes: the open window's one run starts, late but inside its window
    w = Worker(redis, dep, worker_id="window-worker", concurrency=4)
    await nursery.start(w.run)

    async def ran() -> bool:
        run = await _run(http, f"{open_job}:{opened}:1")
        return run is not None and run["state"] == "succeeded"

    await wait_until(ran, timeout=20)
    runs = (await http.get(f"/api/v1/jobs/{open_job}/runs")).json()["runs"]
    ids = [r["run_id"] for r in runs]
    # one run for the window set back; a later minute's window (the test may cross a
    # minute boundary) has its own one run
    assert ids.count(f"{open_job}:{opened}:1") == 1 and len(set(ids)) == len(ids), ids
    assert all(int(i.split(":")[1]) >= opened for i in ids), ids
    job = (await http.get(f"/api/v1/jobs/{open_job}")).json()
    assert job["schedule"]["type"] == "window"
    assert job["next_run_at"].endswith(":00Z")  # the next opening
