"""Per-schedule accounting: ``GET /jobs/{id}/stats`` (and the CLI, the SDK) counts a job's
ticks from its ledger, and says its effective cadence beside the configured one; the
node's skip counter is one series per reason, whatever the fleet's size."""

from __future__ import annotations

import pytest
import trio

from conftest import cli, wait_until


@pytest.mark.slow  # seconds of real firing; CI's slow step runs it
async def test_stats_count_what_the_ledger_shows_and_name_the_cadence(node, worker, http) -> None:
    body = {
        "name": "slow",
        "command": "sleep 2.2",
        "schedule": {"type": "interval", "every_s": 1},
        "overlap": "forbid",
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    created = (await http.get(f"/api/v1/jobs/{job_id}")).json()["created_at"]

    async def enough() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return sum(r["state"] == "succeeded" for r in runs) >= 2

    await wait_until(enough, timeout=30)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    stats = (await http.get(f"/api/v1/jobs/{job_id}/stats", params={"since": created})).json()
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    fired = sum(t["outcome"] == "fired" for t in ticks)
    skipped = sum(t["outcome"] == "skipped" for t in ticks)
    assert stats["fired"] == fired >= 2 and stats["skipped"] == {"overlap": skipped}
    assert skipped >= 2 and stats["missed"] == 0 and stats["duplicated"] == 0
    assert stats["ticks"] == fired + skipped + stats["pending"]
    assert stats["effective_every_s"] > 2 * stats["configured_every_s"]
    assert stats["summary"].startswith("configured every ")
    assert f"{skipped} skipped by overlap" in stats["summary"]

    out = await cli(http, "jobs", "stats", job_id, "--since", created, "--api", str(http.base_url))
    assert out.returncode == 0, out.stderr
    assert "fired" in out.stdout and "skipped by overlap" in out.stdout
    assert "configured every 1s, effective every" in out.stdout
    bad = await http.get(f"/api/v1/jobs/{job_id}/stats", params={"since": "yesterday"})
    assert bad.status_code == 422
    assert (await http.get("/api/v1/jobs/job_nope/stats")).status_code == 404


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_skips_are_counted_by_reason_on_the_node(
    node, worker, http, redis, dep, monkeypatch
) -> None:
    """An outage of one job (its timer entry taken away for 5 s behind the scheduler's
    back, then put back as it was):
    ``catchup: latest`` fires the latest and records the rest skipped, and the node's
    counter of skipped ticks grows by them under the reason, not the job."""
    body = {
        "name": "latest",
        "command": "true",
        "schedule": {"type": "interval", "every_s": 1},
        "catchup": "latest",
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    sk = dep.keys_for(job_id)
    before = node.metrics.ticks_skipped.labels("catchup_latest")._value.get()

    async def one_run() -> bool:
        return bool((await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"])

    await wait_until(one_run, timeout=20)
    score = int(float(await redis.execute("ZSCORE", sk.timer, job_id)))

    async def no_repair(held: object) -> None:  # the owner's liveness sweep would put the
        return None  # entry back itself (tests/shard/test_liveness.py): not this test's

    monkeypatch.setattr(node.maintainer.timers, "round", no_repair)
    await redis.execute("ZREM", sk.timer, job_id)
    await trio.sleep(5)  # waits out 5 s of ticks falling due with the timer entry gone
    await redis.execute("ZADD", sk.timer, score, job_id)
    await redis.execute("PUBLISH", dep.globals.wake_channel, sk.shard)  # as a write does

    async def counted() -> bool:
        return node.metrics.ticks_skipped.labels("catchup_latest")._value.get() >= before + 3

    await wait_until(counted, timeout=20)

    async def recorded() -> bool:  # the ledger's skips, as the API reads them
        stats = (await http.get(f"/api/v1/jobs/{job_id}/stats")).json()
        return stats["skipped"].get("catchup_latest", 0) >= 3

    await wait_until(recorded, timeout=20)
    stats = (await http.get(f"/api/v1/jobs/{job_id}/stats")).json()
    ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
    assert stats["skipped"].get("catchup_latest", 0) >= 3, (stats, ticks)
    assert stats["missed"] == 0 and stats["duplicated"] == 0, stats
    text = node.metrics.render()[0].decode()
    assert 'shardsched_ticks_skipped_total{reason="catchup_latest"}' in text
    assert job_id not in next(line for line in text.splitlines() if "ticks_skipped_total" in line)


async def test_the_configured_cadence_is_the_current_one_after_an_edit(node, worker, http) -> None:
    """Edited from every 1 s to every 2 s, a job is "configured every 2s", not the mean of
    its ticks over both versions (the issue saw "every 44s" after 30 s became 45 s)."""
    body = {"name": "edited", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def fired(n: int) -> bool:
        ticks = (await http.get(f"/api/v1/jobs/{job_id}/ticks")).json()["ticks"]
        return sum(t["outcome"] == "fired" for t in ticks) >= n

    await wait_until(lambda: fired(3), timeout=20)
    patched = await http.patch(
        f"/api/v1/jobs/{job_id}", json={"schedule": {"type": "interval", "every_s": 2}}
    )
    assert patched.status_code == 200, patched.text
    await wait_until(lambda: fired(5), timeout=20)
    stats = (await http.get(f"/api/v1/jobs/{job_id}/stats")).json()
    assert stats["configured_every_s"] == 2 and stats["summary"].startswith("configured every 2s")
