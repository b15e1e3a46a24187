"""Resume choices: a paused job's resume runs the ticks its pause went over as chosen
(skip, latest, all), per job (``on_resume``) or per call, shown first as a dry run that
changes nothing; run under the scheduler's own run ids, so nothing runs twice."""

from __future__ import annotations

import re

from conftest import cli, keyspace, wait_until
from shardsched.core.instants import to_ms


async def _paused_job(http, **body) -> str:
    spec = {"name": "resumed", "command": "true", "schedule": {"type": "interval", "every_s": 1}}
    job_id = (await http.post("/api/v1/jobs", json={**spec, **body})).json()["job_id"]

    async def ran() -> bool:
        return bool((await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"])

    await wait_until(ran, timeout=20)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    return job_id


async def _owed_at_least(http, job_id: str, n: int) -> None:
    """Until the pause has gone over ``n`` ticks, as a dry run of ``all`` (which changes
    nothing) counts them."""
    url = f"/api/v1/jobs/{job_id}/resume"

    async def owed() -> bool:
        plan = (await http.post(url, json={"catchup": "all", "dry_run": True})).json()
        return len(plan["owed"]) >= n

    await wait_until(owed, timeout=20)


def _ms(text: str) -> int:
    from datetime import datetime

    return to_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


async def test_resume_dry_runs_then_all(node, worker, http, redis, dep) -> None:
    job_id = await _paused_job(http)
    await _owed_at_least(http, job_id, 3)
    before = await keyspace(redis, dep.namespace)
    url = f"/api/v1/jobs/{job_id}/resume"
    skip = (await http.post(url, json={"catchup": "skip", "dry_run": True})).json()
    assert skip["owed"] == [] and skip["dry_run"] and skip["job"] is None
    api = ("--api", str(http.base_url))

    async def dry_all() -> list[str]:
        return (await http.post(url, json={"catchup": "all", "dry_run": True})).json()["owed"]

    # The pause keeps going over ticks (one a second) while the test asks, so compare
    # answers only between two identical dry runs of ``all``.
    for _ in range(10):
        owed = await dry_all()
        latest = (await http.post(url, json={"catchup": "latest", "dry_run": True})).json()
        if await dry_all() == owed:
            break
    assert 3 <= len(owed) <= 6, owed
    assert latest["owed"] == owed[-1:]
    paused_at = _ms((await http.get(f"/api/v1/jobs/{job_id}")).json()["paused_at"])
    assert all(_ms(t) >= paused_at for t in owed)
    shown = await cli(http, "jobs", "resume", job_id, "--catchup", "all", "--dry-run", *api)
    after = await dry_all()
    assert shown.returncode == 0, shown.stderr
    head = re.match(r"dry run \(all\): (\d+) tick\(s\) of the pause would run\n", shown.stdout)
    assert head, shown.stdout
    assert len(owed) <= int(head[1]) <= len(after), (shown.stdout, owed, after)
    assert len(shown.stdout.splitlines()) == 1 + int(head[1])
    assert await keyspace(redis, dep.namespace) == before  # dry runs change nothing

    done = (await http.post(url, json={"catchup": "all"})).json()
    assert done["job"]["status"] == "active" and done["queued"] == len(done["owed"])

    async def all_ran() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 100})).json()
        ids = {r["run_id"]: r["state"] for r in runs["runs"]}
        return all(ids.get(f"{job_id}:{_ms(t)}:1") == "succeeded" for t in done["owed"])

    await wait_until(all_ran, timeout=20)
    again = await http.post(url, json={"catchup": "all"})
    assert again.status_code == 409  # active: nothing to resume
    assert again.json()["error"]["code"] == "conflict"
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit


async def test_a_jobs_on_resume_is_its_default(node, worker, http) -> None:
    job_id = await _paused_job(http, name="latest", on_resume="latest")
    assert (await http.get(f"/api/v1/jobs/{job_id}")).json()["on_resume"] == "latest"
    await _owed_at_least(http, job_id, 2)
    done = (await http.post(f"/api/v1/jobs/{job_id}/resume")).json()
    assert done["catchup"] == "latest" and len(done["owed"]) == 1
    bad = await http.post(f"/api/v1/jobs/{job_id}/resume", json={"catchup": "some"})
    assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "$.catchup"


async def test_a_paced_resume_starts_at_most_n_a_minute(node, worker, http) -> None:
    """``paced``: the ticks a pause went over run as ``all`` would, but released by the
    owner's pacer at most ``per_minute`` a minute (300: one per 200 ms), however many
    places ``max_concurrent`` gives; the jobs' own ticks go on beside them."""
    job_id = await _paused_job(http, schedule={"type": "interval", "every_s": 0.25})
    await _owed_at_least(http, job_id, 10)
    url = f"/api/v1/jobs/{job_id}/resume"
    body = {"catchup": "paced", "per_minute": 300, "max_concurrent": 50}
    plan = (await http.post(url, json={**body, "dry_run": True})).json()
    assert plan["catchup"] == "paced" and len(plan["owed"]) >= 10, plan
    done = (await http.post(url, json=body)).json()
    assert done["queued"] == len(done["owed"]) and done["job"]["status"] == "active"
    owed = {f"{job_id}:{_ms(t)}:1" for t in done["owed"]}

    async def all_ran() -> list[dict] | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 500})).json()
        mine = [r for r in runs["runs"] if r["run_id"] in owed]
        return (
            mine
            if len(mine) == len(owed) and all(r["state"] == "succeeded" for r in mine)
            else None
        )

    ran = await wait_until(all_ran, timeout=30)
    made = sorted(_ms(r["created_at"]) for r in ran)
    print("paced releases (ms after the first):", [m - made[0] for m in made])
    # one at once, then a second's worth (5) each pacer round: never all at once
    assert made[-1] - made[0] >= (len(made) - 6) * 200 - 300, made
    for i, first in enumerate(made):
        in_a_second = [m for m in made[i:] if m < first + 1000]
        assert len(in_a_second) <= 7, made
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    audit = (await http.get("/api/v1/audit")).json()
    assert audit["missing"] == 0 and audit["duplicated"] == 0, audit
    bad = await http.post(url, json={"catchup": "paced", "per_minute": 0})
    assert bad.status_code == 422
