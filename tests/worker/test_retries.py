"""Retries as re-insertion with backoff, dead-letter, and the manual retry from it."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import pytest

from conftest import wait_until
from shardsched.core.models import Backoff, RetryPolicy
from shardsched.core.retry import retry_delay_s


def test_backoff_bounds() -> None:
    exp = RetryPolicy(max_attempts=6, backoff=Backoff.EXPONENTIAL, base_s=1, max_s=5, jitter=False)
    assert [retry_delay_s(exp, a) for a in range(1, 6)] == [1, 2, 4, 5, 5]
    fixed = RetryPolicy(backoff=Backoff.FIXED, base_s=3, max_s=10, jitter=False)
    assert [retry_delay_s(fixed, a) for a in (1, 2, 7)] == [3, 3, 3]
    jittered = RetryPolicy(backoff=Backoff.EXPONENTIAL, base_s=2, max_s=100, jitter=True)
    rng = random.Random(7)
    for attempt in (1, 2, 3, 4):
        samples = [retry_delay_s(jittered, attempt, rng) for _ in range(2000)]
        cap = 2 * 2 ** (attempt - 1)
        assert min(samples) >= 0 and max(samples) <= cap
        assert max(samples) > 0.9 * cap and min(samples) < 0.1 * cap  # full jitter: [0, cap]


def ms(text: str) -> float:
    return datetime.fromisoformat(text).timestamp() * 1000


async def test_attempts_follow_the_backoff_then_dead_letter_then_manual_retry(
    node, worker, http, redis, dep
) -> None:
    policy = {
        "max_attempts": 3,
        "backoff": "exponential",
        "base_s": 0.3,
        "max_s": 0.5,
        "jitter": False,
    }
    body = {
        "name": "flaky",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": "echo failing; exit 7",
        "retry_policy": policy,
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def dead() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return runs if len(runs) == 3 and runs[0]["state"] == "dead_letter" else None

    runs = sorted(await wait_until(dead, timeout=15), key=lambda r: r["attempt"])
    assert [r["attempt"] for r in runs] == [1, 2, 3]
    assert [r["state"] for r in runs] == ["failed", "failed", "dead_letter"]
    assert all(r["exit_code"] == 7 for r in runs)
    assert len({r["scheduled_for"] for r in runs}) == 1, "attempts of the same tick"
    for previous, following, delay in zip(runs, runs[1:], (0.3, 0.5), strict=False):
        sk = dep.keys_for(following["run_id"])
        due = int(await redis.execute("HGET", sk.run(following["run_id"]), "due"))
        waited = (due - ms(previous["finished_at"])) / 1000
        assert delay - 0.05 <= waited <= delay + 0.25, (previous["attempt"], waited)
        assert ms(following["started_at"]) >= due - 5, "an attempt never starts before it is due"

    listed = (await http.get("/api/v1/dead-letter")).json()["runs"]
    assert [r["run_id"] for r in listed] == [runs[2]["run_id"]]
    assert (await http.post(f"/api/v1/runs/{runs[0]['run_id']}/retry")).status_code == 409
    assert (await http.post("/api/v1/runs/job_x:1:1/retry")).status_code == 404

    await http.patch(f"/api/v1/jobs/{job_id}", json={"command": "echo fixed"})
    retried = await http.post(f"/api/v1/runs/{runs[2]['run_id']}/retry")
    assert retried.status_code == 201
    fourth = retried.json()
    assert fourth["attempt"] == 4 and fourth["scheduled_for"] == runs[0]["scheduled_for"]

    async def fourth_done() -> dict | None:
        run = (await http.get(f"/api/v1/runs/{fourth['run_id']}")).json()
        return run if run["state"] == "succeeded" else None

    await wait_until(fourth_done, timeout=10)
    assert (await http.get("/api/v1/dead-letter")).json()["runs"] == []


@pytest.mark.parametrize("max_attempts", [2])
async def test_a_retry_that_succeeds_ends_the_chain(
    node, worker, http, tmp_path: Path, max_attempts: int
) -> None:
    mark = tmp_path / "failed-once"
    body = {
        "name": "once-flaky",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": f"[ -f {mark} ] || {{ touch {mark}; exit 1; }}",
        "retry_policy": {"max_attempts": max_attempts, "base_s": 0.1, "jitter": False},
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def second_succeeded() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return runs if any(r["state"] == "succeeded" for r in runs) else None

    runs = sorted(await wait_until(second_succeeded), key=lambda r: r["attempt"])
    assert [(r["attempt"], r["state"]) for r in runs] == [(1, "failed"), (2, "succeeded")]
