"""Gap-aware backfill (``only``: missing, skipped, failed; ``dry_run``) on a real node and
worker: each gap is made the way it happens (a run lost behind the scheduler's back, a
tick skipped by overlap, runs dead-lettered), the dry run lists exactly those ticks, the
backfill runs exactly those once, and the audit is clean after."""

from __future__ import annotations

from conftest import cli, wait_until
from shardsched.core.instants import from_ms


async def _job(http, **body) -> str:
    spec = {"name": "gaps", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    reply = await http.post("/api/v1/jobs", json={**spec, **body})
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def _ticks(http, job_id: str) -> list[dict]:
    return (await http.get(f"/api/v1/jobs/{job_id}/ticks", params={"limit": 1000})).json()["ticks"]


async def _settled(http, job_id: str, n: int) -> list[dict]:
    """Its runs once ``n`` of them have ended (newest first)."""

    async def ended() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 200})).json()
        done = [r for r in runs["runs"] if r["state"] in ("succeeded", "failed")]
        return runs["runs"] if len(done) >= n else None

    return await wait_until(ended, timeout=30)


def _window(ticks: list[dict]) -> dict:
    return {"since": ticks[0]["tick"], "until": ticks[-1]["tick"]}


async def test_only_missing_runs_the_runs_lost_and_nothing_else(node, worker, http, redis, dep):
    job_id = await _job(http)
    runs = await _settled(http, job_id, 4)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    lost = sorted(r["run_id"] for r in runs if r["state"] == "succeeded")[:2]
    sk = dep.keys_for(job_id)
    for rid in lost:  # behind the scheduler's back: the audit's "missing"
        await redis.execute("DEL", sk.run(rid))
        await redis.execute("ZREM", sk.runs_of(job_id), rid)
    ticks = await _ticks(http, job_id)
    missing = [t["tick"] for t in ticks if t["outcome"] == "missing"]
    assert len(missing) == 2
    window = {**_window(ticks), "only": ["missing"]}
    dry = await http.post(f"/api/v1/jobs/{job_id}/backfill", json={**window, "dry_run": True})
    assert dry.status_code == 202, dry.text
    listed = dry.json()
    assert listed["dry_run"] and listed["picked"] == 2 and listed["queued"] == 0
    assert [t["tick"] for t in listed["listed"]] == missing
    assert {t["gap"] for t in listed["listed"]} == {"missing"}
    assert [t["tick"] for t in await _ticks(http, job_id) if t["outcome"] == "missing"] == missing
    api = ("--api", str(http.base_url))
    shown = await cli(
        http, "jobs", "backfill", job_id, "--since", window["since"], "--until",
        window["until"], "--only", "missing", "--dry-run", *api,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"dry run: 2 of {len(ticks)} ticks would run")
    assert shown.stdout.count("missing") == 2
    bad = await cli(
        http, "jobs", "backfill", job_id, "--since", window["since"], "--until",
        window["until"], "--only", "lost", *api,
    )  # fmt: skip
    assert bad.returncode != 0 and "only" in bad.stderr
    done = (await http.post(f"/api/v1/jobs/{job_id}/backfill", json=window)).json()
    assert done["queued"] == 2 and not done["dry_run"]

    async def healed() -> bool:
        outcomes = {t["outcome"] for t in await _ticks(http, job_id)}
        return "missing" not in outcomes

    await wait_until(healed, timeout=20)
    again = (await http.post(f"/api/v1/jobs/{job_id}/backfill", json=window)).json()
    assert again["queued"] == 0 and again["picked"] == 0  # nothing left: a no-op


async def test_only_skipped_and_only_failed(node, worker, http, redis, dep) -> None:
    skipper = await _job(http, name="slow", command="sleep 2.2", overlap="forbid")
    failer = await _job(http, name="failing", command="exit 3", retry_policy={"max_attempts": 1})
    await _settled(http, skipper, 2)
    runs = await _settled(http, failer, 3)
    await http.patch(f"/api/v1/jobs/{skipper}", json={"status": "paused"})
    await http.patch(f"/api/v1/jobs/{failer}", json={"status": "paused", "command": "true"})

    s_ticks = await _ticks(http, skipper)
    skipped = [t["tick"] for t in s_ticks if t["outcome"] == "skipped"]
    assert skipped, s_ticks
    dry = await http.post(
        f"/api/v1/jobs/{skipper}/backfill",
        json={**_window(s_ticks), "only": ["skipped"], "dry_run": True},
    )
    assert [t["tick"] for t in dry.json()["listed"]] == skipped
    assert {t["reason"] for t in dry.json()["listed"]} == {"overlap"}
    none = await http.post(
        f"/api/v1/jobs/{skipper}/backfill",
        json={**_window(s_ticks), "only": ["missing", "failed"], "dry_run": True},
    )
    assert none.json()["picked"] == 0

    dead = sorted(r["run_id"] for r in runs if r["state"] == "failed")  # for good: 1 attempt
    assert len(dead) >= 3
    f_ticks = await _ticks(http, failer)
    window = {**_window(f_ticks), "only": ["failed"]}
    dry = await http.post(f"/api/v1/jobs/{failer}/backfill", json={**window, "dry_run": True})
    listed = dry.json()["listed"]
    assert sorted(t["run_id"] for t in listed) == dead and {t["gap"] for t in listed} == {"failed"}
    done = (await http.post(f"/api/v1/jobs/{failer}/backfill", json=window)).json()
    assert done["retried"] == len(dead) and done["queued"] == 0

    async def rerun() -> bool:
        for rid in dead:
            run = (await http.get(f"/api/v1/runs/{rid}")).json()
            nxt = run.get("next_run_id")
            if not nxt or (await http.get(f"/api/v1/runs/{nxt}")).json()["state"] != "succeeded":
                return False
        return True

    await wait_until(rerun, timeout=20)
    again = (await http.post(f"/api/v1/jobs/{failer}/backfill", json=window)).json()
    assert again["retried"] == 0 and again["picked"] == 0  # each ran again once
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_a_bad_gap_name_is_422_and_changes_nothing(node, http) -> None:
    job_id = await _job(http)
    now = from_ms(0).isoformat()
    for bad in (["lost"], [], ["missing", "missing", "failed", "skipped"]):
        reply = await http.post(
            f"/api/v1/jobs/{job_id}/backfill", json={"since": now, "until": now, "only": bad}
        )
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["details"]["field"].startswith("$.only")
