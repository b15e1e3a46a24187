"""Backpressure on firing (a job's ``backlog``), on a real node with no worker at first so
its runs stay queued: ``skip`` records the ticks past the bound ``skipped: backlog``,
``coalesce`` lets the queued run stand for them (listed on it, recorded ``coalesced``),
``queue`` fires them all; the ledger (/ticks), the stats, the audit and the metric say
so, and once a worker drains the queue, ticks fire again."""

from __future__ import annotations

from prometheus_client import generate_latest

from conftest import wait_until
from shardsched.ops.history.audit import audit
from shardsched.store.drive import drive_async
from shardsched.worker.worker import Worker

EVERY = {"type": "interval", "every_s": 0.2}


async def make(http, job_id: str, backlog: dict | None) -> None:
    body = {"name": job_id, "command": "true", "schedule": EVERY}
    if backlog is not None:
        body["backlog"] = backlog
    reply = await http.put(f"/api/v1/jobs/{job_id}", json=body)
    assert reply.status_code == 201, reply.text


async def runs_of(http, job_id: str) -> list[dict]:
    return (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 200})).json()["runs"]


async def ticks_of(http, job_id: str) -> list[dict]:
    return (await http.get(f"/api/v1/jobs/{job_id}/ticks", params={"limit": 500})).json()["ticks"]


async def test_skip_coalesce_and_queue(http, node, redis, dep, nursery) -> None:
    await make(http, "skips", {"policy": "skip", "max_queued": 2})
    await make(http, "merges", {"policy": "coalesce", "max_queued": 1})
    await make(http, "queues", None)

    async def skipped_enough() -> bool:
        ticks = await ticks_of(http, "skips")
        return sum(t.get("reason") == "backlog" for t in ticks) >= 5

    await wait_until(skipped_enough, timeout=20)
    skips = await runs_of(http, "skips")
    assert len(skips) == 2 and {r["state"] for r in skips} == {"scheduled"}

    async def merged_enough() -> list[dict] | None:
        merges = await runs_of(http, "merges")
        return merges if len(merges[0].get("stands_for") or []) >= 4 else None

    (merged,) = await wait_until(merged_enough, timeout=20)
    ticks = await ticks_of(http, "merges")
    coalesced = [t for t in ticks if t.get("reason") == "coalesced"]
    assert {t["tick"] for t in coalesced} <= set(merged["stands_for"])
    assert merged["stands_for_count"] >= len(merged["stands_for"])
    assert len(await runs_of(http, "queues")) >= 5  # no policy: every tick fired
    stats = (await http.get("/api/v1/jobs/skips/stats")).json()
    assert stats["skipped"]["backlog"] >= 5, stats
    report = await drive_async(audit(dep, settle_s=0.3), redis)
    assert report.skipped_by_reason.get("backlog", 0) >= 3 and report.missing == 0
    assert report.skipped_by_reason.get("coalesced", 0) >= 3
    metrics = generate_latest(node.metrics.registry).decode()  # the node's, which fires
    assert 'reason="backlog"' in metrics and 'reason="coalesced"' in metrics

    worker = Worker(redis, dep, worker_id="late-worker", concurrency=4)
    await nursery.start(worker.run)
    before = len(skips)

    async def fires_again() -> bool:
        runs = await runs_of(http, "skips")
        return len(runs) >= before + 3 and sum(r["state"] == "succeeded" for r in runs) >= 3

    await wait_until(fires_again, timeout=20)


async def test_a_bound_is_required_and_kept(http, node) -> None:
    body = {"name": "x", "command": "true", "schedule": EVERY, "backlog": {"policy": "skip"}}
    reply = await http.put("/api/v1/jobs/x", json=body)
    assert reply.status_code == 422 and "needs a bound" in reply.text
    body["backlog"] = {"policy": "coalesce", "max_age_s": 30}
    reply = await http.put("/api/v1/jobs/x", json=body)
    assert reply.status_code == 201
    assert reply.json()["backlog"] == {"policy": "coalesce", "max_age_s": 30.0}


async def test_events_to_a_job_at_its_cap_are_held_then_released(http, node, redis, dep, nursery):
    """An event (or an upstream's end) to a job whose runs are queued past its backlog
    bound is held, not piled on; once a worker drains the queue, the held ones run, in
    order, never more queued at once than the bound lets through."""
    job = {"name": "capped", "command": "true", "on": [{"event": "cap.e"}],
           "backlog": {"policy": "skip", "max_queued": 2}}  # fmt: skip
    assert (await http.put("/api/v1/jobs/capped", json=job)).status_code == 201
    outcomes = []
    for i in range(5):
        event = (await http.post("/api/v1/events/cap.e", json={"payload": {"i": i}})).json()
        outcomes.append((event["event_id"], event["outcome"]["deliveries"][0]))
    results = [d["result"] for _e, d in outcomes]
    assert results == ["created", "created", "held", "held", "held"], outcomes
    assert "backlog bound" in outcomes[2][1]["reason"]
    worker = Worker(redis, dep, worker_id="cap-worker", concurrency=4)
    await nursery.start(worker.run)

    async def released() -> list[dict] | None:
        runs = await runs_of(http, "capped")
        done = [r for r in runs if r["state"] == "succeeded"]
        return runs if len(done) == 5 else None

    runs = await wait_until(released, timeout=30)
    args = sorted(r["args"]["i"] for r in runs)
    assert args == [0, 1, 2, 3, 4]
    for event_id, _d in outcomes[2:]:
        later = (await http.get(f"/api/v1/events/{event_id}")).json()["later"]
        assert later["capped"].startswith("run:capped:t"), later


async def test_a_queues_default(http, node, redis, dep) -> None:
    """A queue's default backpressure holds its jobs with none of their own; a job's own
    wins; clearing the default lets ticks fire again."""
    bad = await http.put("/api/v1/queues/slow/backlog", json={"policy": "skip"})
    assert bad.status_code == 422 and "needs a bound" in bad.text
    bad = await http.put("/api/v1/queues/no%20spaces/backlog", json={"policy": "queue"})
    assert bad.status_code == 422
    put = await http.put("/api/v1/queues/slow/backlog", json={"policy": "skip", "max_queued": 1})
    assert put.json() == {"queues": {"slow": {"policy": "skip", "max_queued": 1}}}

    async def known() -> bool:  # the node reads the queues' defaults once a second
        return "slow" in node.queue_backlogs.codes

    await wait_until(known, timeout=10)
    for job_id, own in (("plain", None), ("own", {"policy": "skip", "max_queued": 3})):
        body = {"name": job_id, "command": "true", "schedule": EVERY, "queue": "slow"}
        if own:
            body["backlog"] = own
        assert (await http.put(f"/api/v1/jobs/{job_id}", json=body)).status_code == 201

    async def skipped(job_id: str, n: int) -> bool:
        ticks = await ticks_of(http, job_id)
        return sum(t.get("reason") == "backlog" for t in ticks) >= n

    await wait_until(lambda: skipped("plain", 3), timeout=20)
    await wait_until(lambda: skipped("own", 3), timeout=20)
    assert len(await runs_of(http, "plain")) == 1 and len(await runs_of(http, "own")) == 3
    cleared = await http.delete("/api/v1/queues/slow/backlog")
    assert cleared.json() == {"queues": {}}

    async def fires_again() -> bool:
        return len(await runs_of(http, "plain")) >= 3

    await wait_until(fires_again, timeout=20)
