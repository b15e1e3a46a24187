"""A tick is shown by how its run ended, not by the scheduler's "fired": a job whose every
run fails has red ticks, each with the attempts it took (the console's "Ticks, last 24
hours" colours by this). Judged against the job's runs as the runs list gives them."""

from __future__ import annotations

from collections import defaultdict

from conftest import wait_until


async def test_ticks_carry_the_final_state_of_their_last_attempt(node, worker, http) -> None:
    failing = {
        "name": "always-fails",
        "command": "exit 3",
        "schedule": {"type": "interval", "every_s": 1},
        "retry_policy": {"max_attempts": 2, "base_s": 0, "jitter": False},
    }
    ok = {"name": "fine", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    bad_id = (await http.post("/api/v1/jobs", json=failing)).json()["job_id"]
    ok_id = (await http.post("/api/v1/jobs", json=ok)).json()["job_id"]

    async def settled(job_id: str, n: int) -> list[dict] | None:
        ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
        done = [
            t
            for t in ticks
            if t.get("run_state") in ("succeeded", "failed", "dead_letter")
            and (t["run_state"] == "succeeded" or t.get("attempts") == 2)
        ]
        return ticks if len(done) >= n else None

    ticks = await wait_until(lambda: settled(bad_id, 2), timeout=30)
    await http.patch(f"/api/v1/jobs/{bad_id}", json={"status": "paused"})
    runs = (await http.get(f"/api/v1/jobs/{bad_id}/runs", params={"limit": 100})).json()["runs"]
    by_tick: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by_tick[r["scheduled_for"]].append(r)
    checked = 0
    for t in ticks:
        if t["outcome"] != "fired" or t.get("attempts") != 2:
            continue
        attempts = sorted(by_tick[t["tick"]], key=lambda r: r["attempt"])
        last = attempts[-1]
        assert t["run_state"] == last["state"] == "dead_letter"
        assert t["last_run_id"] == last["run_id"] and t["run_id"] == attempts[0]["run_id"]
        assert [r["state"] for r in attempts] == ["failed", "dead_letter"]
        checked += 1
    assert checked >= 2

    good = await wait_until(lambda: settled(ok_id, 2), timeout=30)
    fine = [t for t in good if t.get("run_state") == "succeeded"]
    assert len(fine) >= 2 and all(t["attempts"] == 1 for t in fine)
    assert not any(t.get("run_state") in ("failed", "dead_letter") for t in good)
