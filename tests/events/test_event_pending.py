"""An event stored but never settled (its receiver died between the two) is delivered by
the owner of its shard; delivered twice (receiver and owner), it still makes one run and
records one outcome; the audit counts events with no outcome."""

from __future__ import annotations

import trio

from conftest import wait_until
from shardsched.ops.history.audit import audit
from shardsched.store import event_delivery
from shardsched.store.drive import drive_async

JOB = {"name": "listens", "command": "true", "on": [{"event": "e"}]}


async def test_the_owner_delivers_an_event_its_receiver_left(http, node, redis, dep) -> None:
    job_id = (await http.post("/api/v1/jobs", json=JOB)).json()["job_id"]
    event_id = event_delivery.new_event_id()
    op = event_delivery.receive(dep, event_id, "e", "api:test", "", b'{"x":1}')
    assert (await drive_async(op, redis))[0] == 1  # stored, and the receiver dies here
    report = await drive_async(audit(dep), redis)
    assert report.events == {"received": 1, "pending": 1, "unsettled": 0}

    async def settled() -> dict | None:
        event = (await http.get(f"/api/v1/events/{event_id}")).json()
        return event if event["outcome"] else None

    event = await wait_until(settled, timeout=20)
    (d,) = event["outcome"]["deliveries"]
    assert d == {"job_id": job_id, "result": "created", "run_id": d["run_id"]}
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [r["run_id"] for r in runs] == [d["run_id"]]
    assert node.maintainer.events.redelivered == 1
    report = await drive_async(audit(dep), redis)
    assert report.events == {"received": 1, "pending": 0, "unsettled": 0} and report.ok


async def test_two_deliveries_make_one_run_and_one_outcome(http, redis, dep) -> None:
    job_id = (await http.post("/api/v1/jobs", json=JOB)).json()["job_id"]
    outcomes = []
    for _ in range(20):
        event_id = event_delivery.new_event_id()
        await drive_async(event_delivery.receive(dep, event_id, "e", "t", "", b"{}"), redis)

        async def deliver(event_id: str = event_id) -> None:
            got = await drive_async(event_delivery.redeliver(dep, event_id), redis)
            outcomes.append((event_id, got))

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(deliver)
    assert len(outcomes) == 60
    by_event: dict = {}
    for event_id, outcome in outcomes:
        (d,) = outcome.deliveries
        assert d.result == "created"
        by_event.setdefault(event_id, []).append(outcome)
    assert all(len(v) == 3 and v[0] == v[1] == v[2] for v in by_event.values())  # one outcome
    made = {v[0].deliveries[0].run_id for v in by_event.values()}
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params={"limit": 1000})).json()["runs"]
    assert {r["run_id"] for r in runs} == made and len(made) == 20  # one run per event
