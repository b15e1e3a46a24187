"""Overlap policy: forbid skips (and records) ticks while a run is active; replace cancels it."""

from __future__ import annotations

import itertools
from datetime import datetime

import pytest
import trio

from conftest import wait_until
from waits import pids_gone


def ts(text: str | None) -> float:
    assert text is not None
    return datetime.fromisoformat(text).timestamp()


async def test_forbid_skips_ticks_while_a_run_is_active(node, worker, http) -> None:
    body = {
        "name": "no-overlap",
        "schedule": {"type": "interval", "every_s": 0.5},
        "command": "sleep 1.1",
        "overlap": "forbid",
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def skipped_and_fired() -> bool:
        ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
        outcomes = {t["outcome"] for t in ticks}
        return {"skipped", "fired"} <= outcomes

    await wait_until(skipped_and_fired, timeout=15)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    outcomes = [t["outcome"] for t in ticks]
    assert "skipped" in outcomes and "fired" in outcomes
    assert {t.get("reason") for t in ticks if t["outcome"] == "skipped"} == {"overlap"}
    assert "missing" not in outcomes

    async def all_done() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return runs if all(r["state"] == "succeeded" for r in runs) else None

    runs = sorted(await wait_until(all_done, timeout=10), key=lambda r: r["scheduled_for"])
    for earlier, later in itertools.pairwise(runs):
        assert ts(later["started_at"]) >= ts(earlier["finished_at"]) - 0.01, "runs overlapped"


async def test_replace_cancels_the_active_run_and_kills_it(node, worker, http, tmp_path) -> None:
    done, pids = tmp_path / "finished", tmp_path / "pids"
    body = {
        "name": "replace-me",
        "schedule": {"type": "interval", "every_s": 1.5},
        "command": f"echo $$ >> {pids}; sleep 30; touch {done}",
        "overlap": "replace",
        "lease_s": 1,
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def two_cancelled() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        cancelled = [r for r in runs if r["state"] == "cancelled"]
        return runs if len(cancelled) >= 2 else None

    runs = await wait_until(two_cancelled, timeout=15)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    newest = max(runs, key=lambda r: r["scheduled_for"])
    assert newest["state"] in ("scheduled", "running")
    cancelled = [r for r in runs if r["state"] == "cancelled"]
    assert all("replaced by" in r["reason"] for r in cancelled)
    assert sum(1 for r in runs if r["state"] == "running") <= 1
    started = [int(pid) for pid in pids.read_text().split()]
    assert len(started) >= 2, started  # the replaced runs that had started, and the newest
    ended = await trio.to_thread.run_sync(pids_gone, started[:-1], 5.0)
    assert ended, "a replaced run's process was not killed"
    assert not done.exists()


@pytest.mark.slow  # seconds of real workers; CI's slow step runs it
async def test_cancel_other_starts_the_new_run_after_the_old_one_stopped(
    node, worker, http, tmp_path
) -> None:
    """``cancel_other``: a tick that finds a run going cancels it and waits until its
    worker has stopped it (its lease ended) before it starts: never two at once, unlike
    ``replace``. The job's own log of starts and stops is the independent record."""
    log = tmp_path / "log"
    command = (
        f"echo start $SHARDSCHED_RUN_ID >> {log};"
        f" trap 'echo stop $SHARDSCHED_RUN_ID >> {log}; exit 143' TERM;"
        " sleep 60 & wait"
    )
    body = {
        "name": "cancel-other", "schedule": {"type": "interval", "every_s": 2},
        "command": command, "overlap": "cancel_other", "lease_s": 1, "kill_grace_s": 5,
    }  # fmt: skip
    made = await http.post("/api/v1/jobs", json=body)
    assert made.status_code == 201, made.text
    job_id = made.json()["job_id"]

    async def three_started() -> bool:
        return log.exists() and log.read_text().count("start ") >= 3

    await wait_until(three_started, timeout=40)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    lines = log.read_text().split()
    events = list(zip(lines[::2], lines[1::2], strict=True))
    running = set()
    for what, run_id in events:
        if what == "start":
            assert not running, f"{run_id} started while {running} ran: {events}"
            running.add(run_id)
        else:
            running.discard(run_id)
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
    cancelled = [r for r in runs if r["state"] == "cancelled"]
    assert len(cancelled) >= 2 and all("cancel_other" in r["reason"] for r in cancelled)
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    assert "missing" not in {t["outcome"] for t in ticks}, ticks
