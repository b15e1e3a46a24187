"""Buffered overlap, with real workers: ``buffer_one`` holds one tick while the job's run
goes on (later ones are skipped, recorded) and runs it as soon as that run ends;
``buffer_all`` holds them all, in order. Never two runs of the job at once, nothing
lost, and the audit clean."""

from __future__ import annotations

import itertools
from datetime import datetime

import pytest

from conftest import wait_until


def _ms(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def _job(http, overlap: str, every: float, command: str) -> str:
    body = {
        "name": overlap,
        "command": command,
        "schedule": {"type": "interval", "every_s": every},
        "overlap": overlap,
    }
    reply = await http.post("/api/v1/jobs", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def _settle(http, redis, dep, job_id: str) -> list[dict]:
    """Pause it and wait until nothing of it waits or runs; its runs, oldest first."""
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    key = dep.keys_for(job_id).watch.buffer(job_id)

    async def idle() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 200})).json()
        busy = [r for r in runs["runs"] if r["state"] not in ("succeeded", "skipped")]
        return not busy and await redis.execute("LLEN", key) == 0

    await wait_until(idle, timeout=30)
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 200})).json()["runs"]
    return sorted(runs, key=lambda r: r["scheduled_for"])


def _never_two_at_once(runs: list[dict]) -> None:
    spans = sorted((_ms(r["started_at"]), _ms(r["finished_at"])) for r in runs)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - 0.001, spans


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_buffer_one_holds_one_tick_and_skips_the_rest(node, worker, http, redis, dep):
    job_id = await _job(http, "buffer_one", 1, "sleep 2.3")

    async def three() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return sum(r["state"] == "succeeded" for r in runs) >= 3

    await wait_until(three, timeout=40)
    runs = await _settle(http, redis, dep, job_id)
    _never_two_at_once(runs)
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    reasons = {t.get("reason") for t in ticks if t["outcome"] == "skipped"}
    assert reasons == {"overlap_buffer_full"}, ticks
    # each buffered tick started as its predecessor ended, not at its next tick
    gaps = [_ms(b["started_at"]) - _ms(a["finished_at"]) for a, b in itertools.pairwise(runs)]
    assert gaps and max(gaps) < 0.9, gaps
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


@pytest.mark.slow  # seconds of real firing; CI's slow step runs it
async def test_buffer_all_runs_every_tick_in_order(node, worker, http, redis, dep) -> None:
    job_id = await _job(http, "buffer_all", 0.5, "sleep 1.1")

    async def six_ticks() -> bool:
        ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
        return len(ticks) >= 6

    await wait_until(six_ticks, timeout=20)
    runs = await _settle(http, redis, dep, job_id)
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    assert {t["outcome"] for t in ticks} == {"fired"}, ticks  # none skipped, none lost
    assert len(runs) == len(ticks) >= 6
    _never_two_at_once(runs)
    started = [r["started_at"] for r in runs]
    assert started == sorted(started)  # in the order of their ticks
    events = (await http.get("/api/v1/events", params={"job_id": job_id, "limit": 500})).json()
    assert any(e["new"] == "buffered" for e in events["events"])
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit
