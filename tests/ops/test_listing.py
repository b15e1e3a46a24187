"""Cursor pagination and filters of the list endpoints (issue #7)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from shardsched import IntervalSchedule, JobPatch, JobSpec, ops
from shardsched.core.models import JobStatus
from shardsched.store.drive import drive_async as drive

HOURLY = IntervalSchedule(every_s=3600)


async def all_pages(http: httpx.AsyncClient, path: str, key: str, **params) -> list[dict]:
    items: list[dict] = []
    cursor = None
    for _ in range(1000):
        query = {**params, **({"cursor": cursor} if cursor else {})}
        reply = await http.get(path, params=query)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert len(body[key]) <= int(params.get("limit", 50))
        items += body[key]
        cursor = body["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError("pagination did not end")


async def test_jobs_pages_cover_every_job_once_newest_first(http, redis, dep) -> None:
    # one bulk registration: many jobs share a creation millisecond in each shard
    specs = [
        JobSpec(name=f"{'a' if i % 3 else 'b'}-{i}", schedule=HOURLY, command="true")
        for i in range(250)
    ]
    created = await drive(ops.create_jobs(dep, specs), redis)
    ids = {c.job_id for c in created}
    paused = sorted(ids)[:20]
    for job_id in paused:
        await drive(ops.patch_job(dep, job_id, JobPatch(status=JobStatus.PAUSED)), redis)

    jobs = await all_pages(http, "/api/v1/jobs", "jobs", limit=7)
    assert len(jobs) == 250 and {j["job_id"] for j in jobs} == ids
    stamps = [datetime.fromisoformat(j["created_at"]) for j in jobs]
    assert stamps == sorted(stamps, reverse=True)

    # paging while more jobs are registered neither skips nor repeats what was there
    first = (await http.get("/api/v1/jobs", params={"limit": 100})).json()
    await drive(ops.create_jobs(dep, specs[:30]), redis)
    rest = await all_pages(http, "/api/v1/jobs", "jobs", limit=100, cursor=first["next_cursor"])
    seen = [j["job_id"] for j in first["jobs"] + rest]
    assert len(seen) == len(set(seen)) == 250 and set(seen) == ids

    only_paused = await all_pages(http, "/api/v1/jobs", "jobs", limit=5, status="paused")
    assert sorted(j["job_id"] for j in only_paused) == paused
    prefixed = await all_pages(http, "/api/v1/jobs", "jobs", limit=50, name_prefix="b-")
    registered = specs + specs[:30]
    assert len(prefixed) == len([s for s in registered if s.name.startswith("b-")])
    assert all(j["name"].startswith("b-") for j in prefixed)


async def test_runs_pages_filter_by_state_and_time(node, http, redis, dep) -> None:
    (created,) = await drive(
        ops.create_jobs(dep, [JobSpec(name="r", schedule=HOURLY, command="true")]), redis
    )
    job_id = created.job_id
    triggered = [await drive(ops.trigger(dep, job_id), redis) for _ in range(23)]
    runs = await all_pages(http, f"/api/v1/jobs/{job_id}/runs", "runs", limit=4)
    assert [r["run_id"] for r in runs] == [
        t.run_id for t in sorted(triggered, key=lambda t: (t.scheduled_for, t.run_id), reverse=True)
    ]
    # no worker: every run is still scheduled
    none = await all_pages(http, f"/api/v1/jobs/{job_id}/runs", "runs", state="succeeded")
    assert none == []
    mid = triggered[10].scheduled_for
    since = await all_pages(
        http, f"/api/v1/jobs/{job_id}/runs", "runs", since=mid.isoformat(), limit=3
    )
    assert {r["run_id"] for r in since} == {t.run_id for t in triggered if t.scheduled_for >= mid}
    until = await all_pages(http, f"/api/v1/jobs/{job_id}/runs", "runs", until=mid.isoformat())
    assert {r["run_id"] for r in until} == {t.run_id for t in triggered if t.scheduled_for <= mid}


async def test_bad_list_parameters_are_422_naming_the_parameter(http, redis, dep) -> None:
    (created,) = await drive(
        ops.create_jobs(dep, [JobSpec(name="r", schedule=HOURLY, command="true")]), redis
    )
    for path, params, field in [
        ("/api/v1/jobs", {"limit": "0"}, "$.limit"),
        ("/api/v1/jobs", {"limit": "1001"}, "$.limit"),
        ("/api/v1/jobs", {"limit": "ten"}, "$.limit"),
        ("/api/v1/jobs", {"status": "sleeping"}, "$.status"),
        ("/api/v1/jobs", {"cursor": "!!!"}, "$.cursor"),
        ("/api/v1/jobs", {"colour": "red"}, "$.colour"),
        (f"/api/v1/jobs/{created.job_id}/runs", {"state": "done"}, "$.state"),
        (f"/api/v1/jobs/{created.job_id}/runs", {"since": "yesterday"}, "$.since"),
        (f"/api/v1/jobs/{created.job_id}/runs", {"since": "2026-01-01T00:00:00"}, "$.since"),
        ("/api/v1/dead-letter", {"limit": "-1"}, "$.limit"),
        ("/api/v1/dags", {"status": "x"}, "$.status"),
    ]:
        reply = await http.get(path, params=params)
        assert reply.status_code == 422, (path, params, reply.text)
        assert reply.json()["error"]["details"]["field"] == field, reply.json()
    assert (await http.get("/api/v1/jobs/job_nope/runs")).status_code == 404
    assert datetime.now(UTC)


async def test_lists_leave_deleted_jobs_out_unless_asked(node, http) -> None:
    body = {"name": "gone-soon", "command": "true", "schedule": {"type": "interval", "every_s": 60}}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    assert (await http.delete(f"/api/v1/jobs/{job_id}")).status_code == 200
    again = await http.delete(f"/api/v1/jobs/{job_id}")
    assert again.status_code == 200 and again.json()["status"] == "deleted"

    async def ids(**params) -> set[str]:
        page = (await http.get("/api/v1/jobs", params={"name_prefix": "gone-", **params})).json()
        return {j["job_id"] for j in page["jobs"]}

    assert await ids() == set()
    assert await ids(include_deleted="true") == {job_id}
    assert await ids(status="deleted") == {job_id}
