"""The internal worker protocol over HTTP, through the reference client, on real Redis."""

from __future__ import annotations

import pytest
import trio

from conftest import wait_until
from shardsched import ops
from shardsched.ops.cluster import list_workers
from shardsched.worker.http_client import HttpWorkerClient, ProtocolError


async def test_http_worker_claims_renews_and_completes(node, http, redis, dep) -> None:
    body = {
        "name": "remote",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "command": "echo remote",
        "lease_s": 5,
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    base = str(http.base_url)
    a = HttpWorkerClient(base, "remote-a")
    b = HttpWorkerClient(base, "remote-b")

    await trio.to_thread.run_sync(a.heartbeat, 4, 4)
    listed = await ops.drive_async(list_workers(dep), redis)
    assert [w.worker_id for w in listed.workers] == ["remote-a"]

    async def claimed() -> list | None:
        return await trio.to_thread.run_sync(a.claim, 2) or None

    (run,) = await wait_until(claimed)
    assert run["command"] == "echo remote" and run["attempt"] == 1
    assert run["run_id"].startswith(job_id)
    renewed = await trio.to_thread.run_sync(a.renew, run)
    assert renewed["lease_expires_at"] >= run["lease_expires_at"]

    with pytest.raises(ProtocolError) as refused:  # another worker cannot renew or finish it
        await trio.to_thread.run_sync(b.renew, run)
    assert refused.value.status == 409
    with pytest.raises(ProtocolError) as refused:
        await trio.to_thread.run_sync(lambda: b.complete(run, True, 0))
    assert refused.value.status == 409

    done = await trio.to_thread.run_sync(lambda: a.complete(run, True, 0, output="remote\n"))
    assert done == {"run_id": run["run_id"], "state": "succeeded"}
    got = (await http.get(f"/api/v1/runs/{run['run_id']}")).json()
    assert got["state"] == "succeeded" and got["claimed_by"] == "remote-a"
    out = (await http.get(f"/api/v1/runs/{run['run_id']}/output")).json()["output"]
    assert out == "remote\n"
    bad = await http.post("/internal/runs/claim", json={"worker_id": "", "max_runs": 0})
    assert bad.status_code == 422
