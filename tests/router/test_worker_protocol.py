"""The internal worker protocol over HTTP, through the reference client, on real Redis."""

from __future__ import annotations

from datetime import datetime

import pytest
import trio

from conftest import wait_until
from shardsched.ops.deployment.cluster import list_workers
from shardsched.store.drive import drive_async
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
    token = http.headers["authorization"].removeprefix("Bearer ")
    a = HttpWorkerClient(base, "remote-a", token)
    b = HttpWorkerClient(base, "remote-b", token)

    await trio.to_thread.run_sync(a.heartbeat, 4, 4)
    listed = await drive_async(list_workers(dep), redis)
    assert [w.worker_id for w in listed.workers] == ["remote-a"]

    async def claimed() -> list | None:
        return await trio.to_thread.run_sync(a.claim, 2) or None

    (run,) = await wait_until(claimed)
    assert run["command"] == "echo remote" and run["attempt"] == 1
    assert run["run_id"].startswith(job_id)
    renewed = await trio.to_thread.run_sync(a.renew, run)
    expiry = [datetime.fromisoformat(r["lease_expires_at"]) for r in (run, renewed)]
    assert expiry[1] >= expiry[0]  # instants: "…:10Z" sorts after "…:10.5Z" as text

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


async def test_a_completion_must_name_the_entry_its_run_was_claimed_from(
    node, http, redis, dep
) -> None:
    """Worker a holds two runs; a completion of one that names the other's stream entry
    (or renews with it) is refused and applies nothing: acking the wrong entry would let
    the other run be reclaimed and run twice."""
    once = {"type": "once", "at": "2020-01-01T00:00:00Z"}
    for name in ("one", "two"):
        body = {"name": name, "schedule": once, "command": "true", "lease_s": 30}
        assert (await http.post("/api/v1/jobs", json=body)).status_code == 201
    token = http.headers["authorization"].removeprefix("Bearer ")
    a = HttpWorkerClient(str(http.base_url), "a", token)
    held: list[dict] = []

    async def both() -> bool:
        held.extend(await trio.to_thread.run_sync(a.claim, 2))
        return len(held) == 2

    await wait_until(both)
    first, second = held
    forged = {**first, "entry_id": second["entry_id"]}
    for call in (lambda: a.complete(forged, True, 0), lambda: a.renew(forged)):
        with pytest.raises(ProtocolError) as refused:
            await trio.to_thread.run_sync(call)
        assert refused.value.status == 409
    for run in held:
        got = (await http.get(f"/api/v1/runs/{run['run_id']}")).json()
        assert got["state"] == "running", got
    sk = dep.keys_for(second["run_id"])
    pending = await redis.execute("XPENDING", sk.ready, "workers", "-", "+", 10)
    assert second["entry_id"].encode() in [p[0] for p in pending]
    for run in held:  # the true entries still work
        assert (await trio.to_thread.run_sync(lambda r=run: a.complete(r, True, 0)))[
            "state"
        ] == "succeeded"


async def test_a_worker_id_in_the_path_is_validated(http) -> None:
    # and what an independent tester sent: a trailing newline, NUL, an escape sequence, a
    # bidirectional override (all once accepted and listed by GET /workers)
    hostile = ("wk%0a", "wk%00", "wk%1b%5b31mRED", "wk%E2%80%AEgnp.exe")
    for bad in ("a:b", "has space", "x" * 201, *hostile):
        reply = await http.post(f"/internal/workers/{bad}/heartbeat", json={})
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["details"]["field"] == "$.worker_id"


async def test_a_worker_token_acts_only_as_its_own_workers(node, http, redis, dep) -> None:
    """A worker's token names the workers it may be (its prefixes, or its name): it cannot
    claim, renew or complete as another worker, even one whose run it saw."""
    from shardsched.core.access import Scope, TokenRequest
    from shardsched.ops.access import tokens

    async def worker_token(name: str, prefixes: list[str]) -> str:
        request = TokenRequest(name=name, scopes=[Scope.WORKER], prefixes=prefixes)
        return str((await drive_async(tokens.create_token(dep, request, "t"), redis)).token)

    body = {"name": "own", "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
            "command": "true", "lease_s": 5}  # fmt: skip
    await http.post("/api/v1/jobs", json=body)
    base = str(http.base_url)
    pool = await worker_token("pool", ["pool-"])
    solo = await worker_token("solo", [])
    mine = HttpWorkerClient(base, "pool-1", pool)
    await trio.to_thread.run_sync(mine.heartbeat, 2, 2)

    async def claimed() -> list | None:
        return await trio.to_thread.run_sync(mine.claim, 1) or None

    (run,) = await wait_until(claimed)
    for who, worker_id in ((solo, "pool-1"), (pool, "solo"), (pool, "other-1")):
        impostor = HttpWorkerClient(base, worker_id, who)
        for call in (
            lambda c=impostor: c.heartbeat(1, 1),
            lambda c=impostor: c.claim(1),
            lambda c=impostor: c.renew(run),
            lambda c=impostor: c.complete(run, False, 1),
        ):
            with pytest.raises(ProtocolError) as refused:
                await trio.to_thread.run_sync(call)
            assert refused.value.status == 403, (worker_id, refused.value)
    assert (await http.get(f"/api/v1/runs/{run['run_id']}")).json()["state"] == "running"
    solo_self = HttpWorkerClient(base, "solo-7", solo)  # its name is its prefix
    await trio.to_thread.run_sync(solo_self.heartbeat, 1, 1)
    done = await trio.to_thread.run_sync(lambda: mine.complete(run, True, 0))
    assert done["state"] == "succeeded"
