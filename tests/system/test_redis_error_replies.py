"""No Redis error reply ends a process (DESIGN §2): a node, a worker and a router, each a
real process, talk to a real redis-server through a proxy (tests/redis_faults.py) that
refuses a share of their commands, pipelines and scripts alike, with BUSY, LOADING,
NOPERM, READONLY, OOM and MASTERDOWN in turn, the way Redis would (the refused command
never reaches the server). Meanwhile jobs fire every second and the API is called.

Before the typed replies of store/, a BUSY on the notification dispatcher's config read
ended the node (a ReplyError handed to code that took its ``len()``).

Judged three ways: every process is still up and logged no traceback; the API answered
every call with a 2xx or a 503 in the error shape, never a 500; and, once the proxy stops
refusing, the audit finds nothing missing, doubled or stranded, and every run the ledger
says succeeded is in the record the jobs wrote themselves.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
import trio

from conftest import TEST_SHARDS, RedisServer, admin_token, child_env, shardsched_cmd, wait_until
from redis_faults import ERRORS, FaultProxy
from shardsched import ops
from shardsched.ops.history import audit
from shardsched.runtime.redis_server import free_port
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis
from waits import start_logged
from workers import start_worker

pytestmark = pytest.mark.processes

JOBS = 4
EACH_S = 1.5  #: how long each error is injected


def start_http(
    kind: str, url: str, ns: str, log: Path, procs: dict[str, subprocess.Popen[bytes]]
) -> str:
    """Start a node or router (in ``procs`` at once, so it is stopped whatever
    happens next) and wait until it is ready; its base URL."""
    port = free_port()
    args = [kind, "--redis", url, "--namespace", ns, "--http", f"127.0.0.1:{port}"]
    if kind == "node":
        args += ["--shards", str(TEST_SHARDS), "--renew-every", "0.5"]
    watch = start_logged(shardsched_cmd(*args), log, env=child_env())
    procs[kind] = watch.proc
    watch.wait_for_sync(" ready", timeout=30)
    return f"http://127.0.0.1:{port}"


@pytest.mark.timeout(180)
async def test_error_replies_on_every_pipeline_end_no_process(
    nursery: trio.Nursery,
    redis_server: RedisServer,
    redis: Redis,
    dep: ops.Deployment,
    namespace: str,
    tmp_path: Path,
) -> None:
    proxy = FaultProxy(redis_server.port)
    await nursery.start(proxy.run)
    token = await admin_token(redis, dep)
    logs = {k: tmp_path / f"{k}.log" for k in ("node", "router", "worker")}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        urls: dict[str, str] = {}

        async def start(kind: str) -> None:
            urls[kind] = await trio.to_thread.run_sync(
                start_http, kind, proxy.url(), namespace, logs[kind], procs
            )

        async with trio.open_nursery() as starting:  # the three start side by side
            starting.start_soon(start, "node")
            starting.start_soon(start, "router")
            procs["worker"] = start_worker(proxy.url(), namespace, "w-faults", logs["worker"])
        node_url, router_url = urls["node"], urls["router"]
        record = tmp_path / "record"
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(timeout=15, headers=headers) as http:
            job_ids: list[str] = []
            for i in range(JOBS):
                made = await http.post(
                    f"{node_url}/api/v1/jobs",
                    json={
                        "name": f"ticker-{i}",
                        "schedule": {"type": "interval", "every_s": 1},
                        "command": f'echo "$SHARDSCHED_RUN_ID" >> {record}',
                        "retry_policy": {"max_attempts": 5, "backoff": "fixed", "base_s": 1},
                    },
                )
                assert made.status_code == 201, made.text
                job_ids.append(made.json()["job_id"])
            statuses: list[tuple[str, str, int, str]] = []

            async def call_api(error: str) -> None:
                for base in (node_url, router_url):
                    for method, path in (
                        ("GET", "/api/v1/jobs"),
                        ("GET", "/api/v1/dead-letter"),
                        ("POST", f"/api/v1/jobs/{job_ids[0]}/trigger"),
                        ("GET", "/readyz"),
                    ):
                        try:
                            reply = await http.request(method, base + path)
                        except httpx.TransportError as exc:
                            statuses.append((error, path, 0, repr(exc)))
                            continue
                        statuses.append((error, path, reply.status_code, reply.text[:200]))

            for error in ERRORS:
                proxy.errors, proxy.rate = (error,), 0.3
                with trio.move_on_after(EACH_S):
                    while True:
                        await call_api(error)
                        await trio.sleep(0.2)  # the calls' pace while errors are injected
                proxy.errors, proxy.rate = (), 0.0
                for kind, proc in procs.items():
                    assert proc.poll() is None, (
                        f"{error} ended it: {logs[kind].read_text()[-3000:]}"
                    )

            assert sum(proxy.injected.values()) > 100, proxy.injected
            bad = [s for s in statuses if (s[2] >= 500 and s[2] != 503) or s[2] == 0]
            assert not bad, bad[:10]
            sheds = [s for s in statuses if s[2] == 503 and s[1] != "/readyz"]
            assert all('"error"' in s[3] for s in sheds), sheds[:5]

        async def settled() -> audit.AuditReport | None:
            report = await drive_async(audit.audit(dep, settle_s=2.0), redis)
            done = report.executions.get("terminal", 0) == report.fired - report.executions.get(
                "dag", 0
            )
            return report if done and report.pending == 0 else None

        report = await wait_until(settled, timeout=60)
        assert report.ok and report.missing == 0 and report.duplicated == 0, report
        assert report.fired >= JOBS * len(ERRORS) * EACH_S * 0.5, report
        succeeded = set()
        for job_id in job_ids:
            page = await drive_async(ops.listing.runs_page(dep, job_id, limit=500), redis)
            succeeded |= {r.run_id for r in page.runs if r.state == "succeeded"}
        ran = set(record.read_text().split())  # after: the jobs go on firing meanwhile
        assert succeeded and succeeded <= ran, sorted(succeeded - ran)[:5]
        for kind, proc in procs.items():
            text = logs[kind].read_text()
            assert proc.poll() is None, text[-3000:]
            assert "Traceback" not in text, text[text.index("Traceback") - 200 :][:3000]
        print(f"refused {dict(proxy.injected)}; by command {dict(proxy.by_command)}")
        print(f"fired {report.fired}, API answers {len(statuses)}")
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("error", list(ERRORS))
async def test_the_sdks_hear_come_back_later_for_every_refusal(
    nursery: trio.Nursery, redis_server: RedisServer, dep: ops.Deployment, error: str
) -> None:
    """Both SDKs (redis-py's and the trio one) raise RedisUnavailable for a refusal, as the
    API answers 503: never a TypeError from a decoder that took the reply for data."""
    from shardsched.core.errors import RedisUnavailable
    from shardsched.sdk import AsyncClient, Client

    proxy = FaultProxy(redis_server.port)
    await nursery.start(proxy.run)
    client = await trio.to_thread.run_sync(Client, proxy.url(), dep.namespace)
    aclient = await AsyncClient.open(proxy.url(), dep.namespace)
    try:
        proxy.errors, proxy.rate = (error,), 1.0
        with pytest.raises(RedisUnavailable, match=error):
            await trio.to_thread.run_sync(client.list_jobs)
        with pytest.raises(RedisUnavailable, match=error):
            await aclient.list_jobs()
        proxy.errors, proxy.rate = (), 0.0
        assert (await trio.to_thread.run_sync(client.list_jobs)).jobs == []
    finally:
        await aclient.aclose()
        client.close()
