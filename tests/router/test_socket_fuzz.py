"""Nothing a client sends ends the process: thousands of misbehaving raw-socket clients
(tests/socket_fuzz.py) against a real `node` over HTTP and a real `router` over HTTPS, with
and without tokens, while /healthz must keep answering and the process must stay up.

Before the connection handling of router/server.py, one request with a token, a
Content-Length larger than its body and a half-close ended the process
(trio.BusyResourceError out of hypercorn's connection task into the server's nursery).
"""

from __future__ import annotations

import random
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import trio

import socket_fuzz
from conftest import TEST_SHARDS, RedisServer, admin_token, child_env, shardsched_cmd
from shardsched import ops
from shardsched.runtime.redis_server import free_port
from shardsched.store.redis import Redis
from waits import LogWatch, start_logged

CLIENTS = 24


Proc = subprocess.Popen[bytes]


def start(kind: str, server: RedisServer, ns: str, log: Path, *extra: str) -> tuple[Proc, int]:
    port = free_port()
    args = [kind, "--redis", server.url, "--namespace", ns, "--http", f"127.0.0.1:{port}"]
    if kind == "node":
        args += ["--shards", str(TEST_SHARDS)]
    watch = start_logged(shardsched_cmd(*args, *extra), log, env=child_env())
    _watches[watch.proc.pid] = watch
    return watch.proc, port


#: each started process's output, by pid: its ready line is what wait_ready waits for
_watches: dict[int, LogWatch] = {}


def client_tls() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the test's own self-signed certificate
    return ctx


class Watch:
    """Asks /healthz every 0.5 s while the clients misbehave; remembers every miss."""

    def __init__(self, proc: Proc, port: int, tls: ssl.SSLContext | None) -> None:
        self.proc, self.port, self.tls = proc, port, tls
        self.misses: list[str] = []
        self.asked = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.asked += 1
            if self.proc.poll() is not None:
                self.misses.append(f"process exited with {self.proc.returncode}")
                return
            if not socket_fuzz.healthz(self.port, self.tls):
                self.misses.append(f"/healthz did not answer at {time.monotonic():.1f}")

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_ready(proc: Proc, port: int, tls: ssl.SSLContext | None, log: Path) -> None:
    _watches[proc.pid].wait_for_sync(" ready", timeout=30)
    assert socket_fuzz.healthz(port, tls, timeout=5), log.read_text()[-3000:]


def fuzz(port: int, token: str, seed: int, n: int, tls: ssl.SSLContext | None) -> None:
    rng = random.Random(seed)
    jobs = []
    with ThreadPoolExecutor(CLIENTS) as pool:
        for i, case in zip(range(n), socket_fuzz.cases(seed, token), strict=False):
            if tls is not None and i % 5 == 0:
                hello = random.Random(rng.random())
                jobs.append(pool.submit(socket_fuzz.bad_handshake, port, hello, tls))
            jobs.append(pool.submit(socket_fuzz.play, port, case, tls))
        for job in jobs:
            job.result()  # play swallows the client's socket errors; anything else is a bug here


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    running = [proc for proc in started if proc.poll() is None]
    for proc in running:  # all at once: each drains what the fuzzer left open (DRAIN_S)
        proc.terminate()
    for proc in running:
        proc.wait(timeout=20)


@pytest.mark.timeout(240)
async def test_misbehaving_clients_end_no_process(
    redis_server: RedisServer,
    redis: Redis,
    dep: ops.Deployment,
    namespace: str,
    tmp_path: Path,
    cert: tuple[Path, Path],
    procs: list[subprocess.Popen[bytes]],
) -> None:
    token = await admin_token(redis, dep)
    node, node_port = start("node", redis_server, namespace, tmp_path / "node.log")
    router, router_port = start(
        "router", redis_server, namespace, tmp_path / "router.log",
        "--certfile", str(cert[0]), "--keyfile", str(cert[1]),
    )  # fmt: skip
    procs += [node, router]
    tls = client_tls()
    await trio.to_thread.run_sync(wait_ready, node, node_port, None, tmp_path / "node.log")
    await trio.to_thread.run_sync(wait_ready, router, router_port, tls, tmp_path / "router.log")

    for proc, port, ctx, n, log in (
        (node, node_port, None, 2000, tmp_path / "node.log"),
        (router, router_port, tls, 1000, tmp_path / "router.log"),
    ):
        with Watch(proc, port, ctx) as watch:
            await trio.to_thread.run_sync(fuzz, port, token, 28, n, ctx)
        assert proc.poll() is None, f"the process ended: {log.read_text()[-4000:]}"
        assert watch.asked > 0
        assert not watch.misses, (watch.misses, log.read_text()[-4000:])
        assert socket_fuzz.healthz(port, ctx)
        # and the API itself serves again once the fuzzer's connections are gone (a
        # connection's requests are cut at the latest a write timeout after it ended)
        deadline = time.monotonic() + 40
        while (status := socket_fuzz.api_status(port, token, ctx)) != 200:
            assert time.monotonic() < deadline, f"the API still answers {status}"
            await trio.sleep(0.5)  # the poll's pace: state outside Redis (the API answers)
        text = log.read_text()
        assert "Traceback" not in text, text[-4000:]
