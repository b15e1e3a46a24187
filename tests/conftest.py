"""Fixtures: real redis-servers on free loopback ports, in-process nodes, workers and HTTP.

Each test owns a unique key namespace on the shared server, so no test sees another's keys
and nothing is flushed. Tests that kill or restart Redis start a server of their own.
"""

from __future__ import annotations

import compileall
import gc
import os
import shutil
import signal
import subprocess
import sys
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import trio

import waits
from shardsched import ops
from shardsched.core.access import Scope, TokenRequest
from shardsched.ops.access import tokens
from shardsched.router.app import create_app
from shardsched.runtime.redis_server import free_port, redis_server_args
from shardsched.service import serve_http
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis
from shardsched.worker.worker import Worker
from waits import wait_until


def pytest_configure(config: pytest.Config) -> None:
    """Compile shardsched's modules once, before the workers and processes start: where
    PYTHONDONTWRITEBYTECODE is set (this machine sets it), every process the suite starts
    (a few hundred: nodes, workers, CLI calls) would otherwise compile the package from
    source, 0.1 to 0.4 s of CPU each. Reading the cached code is not affected by it."""
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        compileall.compile_dir(Path(ops.__file__).parents[1], quiet=2)


#: Modules of slow tests whose collection alone is costly (schemathesis builds its coverage
#: examples as it collects: 18 s of CPU in each xdist worker): the default run, whose mark
#: expression is exactly "not slow", does not collect them.
SLOW_ONLY_MODULES = frozenset({"test_openapi_conformance.py"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    default_run = (config.getoption("markexpr") or "").strip() == "not slow"
    return True if default_run and collection_path.name in SLOW_ONLY_MODULES else None


REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
# The notification tests' receivers listen on loopback, which webhooks may not reach
# unless the operator allows it (core/notify_addresses): allowed for this suite and the
# processes it starts, as an operator would with --notify-allow-network; the test of the
# policy itself removes it.
os.environ["SHARDSCHED_NOTIFY_ALLOW_NETWORKS"] = "127.0.0.0/8"
TEST_SHARDS = 8
#: The deadline of a `slow` test (the default, pyproject's `timeout`, is 300 s).
SLOW_TIMEOUT_S = 900

# A suite started in the background (``cmd &`` in a script) inherits SIGINT ignored, and
# so would every process it starts: a test that interrupts a CLI would wait for ever.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@dataclass
class RedisServer:
    """A redis-server process of the test session's own, on a free loopback port."""

    data_dir: Path
    fsync: str = "always"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = redis_server_args(self.port, self.data_dir, self.fsync)
        # its log on stdout, read as it comes: it says when it accepts connections
        args += [*waits.NOTIFY_ARGS, "--logfile", ""]
        log = waits.start_logged(args, self.data_dir / "redis.log")
        self.proc = log.proc
        try:
            log.wait_for_sync("Ready to accept connections", timeout=10)
        except AssertionError:
            self.proc.kill()
            raise
        waits.watch(self.url)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        waits.unwatch(self.url)
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        waits.unwatch(self.url)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server this test alone may kill and restart."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def namespace() -> str:
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = Redis(redis_server.url, size=8)
    yield client
    await client.aclose()


@pytest.fixture
async def dep(redis: Redis, namespace: str) -> ops.Deployment:
    return await drive_async(ops.open_deployment(namespace, TEST_SHARDS), redis)


@pytest.fixture
async def node(nursery: trio.Nursery, redis: Redis, dep: ops.Deployment) -> ShardManager:
    manager = ShardManager(
        redis, dep, node_id="test-node", renew_every_s=0.5, auto_resume=ops.resume_if_due
    )
    await nursery.start(manager.run)
    return manager


@pytest.fixture
async def worker(nursery: trio.Nursery, redis: Redis, dep: ops.Deployment) -> Worker:
    w = Worker(redis, dep, worker_id="test-worker", concurrency=8)
    await nursery.start(w.run)
    return w


@pytest.fixture
async def http(
    nursery: trio.Nursery, redis: Redis, dep: ops.Deployment
) -> AsyncIterator[httpx.AsyncClient]:
    binds = await nursery.start(serve_http, create_app(redis, dep), "127.0.0.1:0")
    headers = {"authorization": f"Bearer {await admin_token(redis, dep)}"}
    async with httpx.AsyncClient(base_url=binds[0], timeout=10, headers=headers) as client:
        yield client


async def admin_token(redis: Redis, dep: ops.Deployment, name: str = "test-admin") -> str:
    """A token with every scope (admin and worker), made straight in Redis."""
    request = TokenRequest(name=name, scopes=[Scope.ADMIN, Scope.WORKER])
    created = await drive_async(tokens.create_token(dep, request, "tests"), redis)
    return str(created.token)


#: (and ``lag``, the history of the nodes' trigger lag each node adds to every 15 s)
LIVENESS_KEYS = ("ready", "nodes", "nodeinfo", "workers", "workerinfo", "lag", "ntflease")


async def keyspace(redis: Redis, namespace: str) -> dict[bytes, bytes]:
    """Every key of a namespace with its DUMP: equal snapshots mean nothing was written.
    Liveness is left out: idle workers pop wake tokens whenever they like, and nodes and
    workers write their heartbeat records on their own clocks. So is each shard's
    ``names_indexed`` mark, set once by its owner's first maintenance round, and a ready
    stream with no entries: a worker's first claim on a shard creates its consumer group
    (and so the stream) whenever the worker happens to look there; the notification
    outbox alike when empty (the dispatcher makes it as it takes its lease). And each
    shard's ``reclaim_at``: when its owner next sweeps for lapsed leases, written by every
    sweep on the owner's clock (a first sweep that had not reached shard 7 yet failed a
    CI run that compared snapshots around it)."""
    keys: list[bytes] = []
    cursor = b"0"
    while True:
        cursor, batch = await redis.execute(
            "SCAN", cursor, "MATCH", f"{namespace}:*", "COUNT", 1000
        )
        keys += batch
        if cursor == b"0":
            break
    volatile = {f"{namespace}:{{g}}:{name}".encode() for name in LIVENESS_KEYS}
    owners_marks = (b"}:names_indexed", b"}:reclaim_at")
    keys = [key for key in keys if key not in volatile and not key.endswith(owners_marks)]
    streams = [
        key for key in keys if (b"}:ready" in key and b"{g}" not in key) or key.endswith(b"ntfout")
    ]
    lengths = await redis.pipeline([("XLEN", key) for key in streams]) if streams else []
    empty = {key for key, n in zip(streams, lengths, strict=True) if n == 0}
    keys = [key for key in keys if key not in empty]
    dumps = await redis.pipeline([("DUMP", key) for key in keys]) if keys else []
    return dict(zip(keys, dumps, strict=True))


async def rounds_later(count, n: int, timeout: float = 20) -> None:
    """Until ``count()`` (a component's round counter) has grown by ``n``: "n rounds
    later" rather than a number of seconds."""
    start = count()

    async def done() -> bool:
        return count() >= start + n

    await wait_until(done, timeout=timeout)


async def drive_list(op, redis: Redis) -> list:
    """Drive a page operation; its items (the first field of the page Struct)."""
    page = await drive_async(op, redis)
    return list(getattr(page, page.__struct_fields__[0]))


def shardsched_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "shardsched", *args]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def start_api_node(
    redis_server: RedisServer, namespace: str, log_path: Path, shards: int = 4
) -> tuple[subprocess.Popen[bytes], str]:
    """A node process serving the API on its own namespace; returns it and its base URL
    once it says it is ready (it owns its shards by then; its log in ``log_path``)."""
    port = free_port()
    watch = waits.start_logged(
        shardsched_cmd(
            "node",
            "--redis",
            redis_server.url,
            "--namespace",
            namespace,
            "--shards",
            str(shards),
            "--http",
            f"127.0.0.1:{port}",
        ),
        log_path,
        env=child_env(),
    )
    try:
        watch.wait_for_sync("node ready", timeout=20)
    except AssertionError:
        watch.proc.kill()
        raise
    base = f"http://127.0.0.1:{port}"
    assert httpx.get(f"{base}/readyz", timeout=5).status_code == 200, watch.text()
    return watch.proc, base


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 server on a loopback port, a bucket, and the environment pointing at it;
    yields an archive URL in the bucket."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }.items():
        monkeypatch.setenv(name, value)
    import boto3

    # A socket to an earlier test's S3 server, collected while this set-up parses
    # botocore's models, failed it once more (CI, after the collect below was added): the
    # set-up's own collection runs with ResourceWarning ignored, so none is met here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        try:
            client.create_bucket(Bucket="runs")
        finally:
            client.close()  # its pooled socket, left to the collector, warns in a later test
        gc.collect()
    yield "s3://runs/shardsched"
    server.stop()
    # Twice a socket to an S3 server left for the collector failed a later S3 test's
    # set-up with a ResourceWarning (the collector ran inside botocore's model parse).
    # Collect now, with the server gone, so no later test inherits one.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


async def cli(
    http: httpx.AsyncClient, *args: str, stdin: str | None = None, env: dict | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with the test API's token in SHARDSCHED_TOKEN."""
    token = http.headers["authorization"].removeprefix("Bearer ")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            shardsched_cmd(*args),
            input=stdin,
            capture_output=True,
            text=True,
            env={**child_env(), "SHARDSCHED_TOKEN": token, **(env or {})},
            timeout=30,
        )

    return await trio.to_thread.run_sync(run)


@pytest.fixture
def workers(redis_server, dep, tmp_path):
    """Start real worker processes: ``workers(worker_id, *flags, env=…)``; each logs to
    ``<tmp_path>/<worker_id>.log`` and is killed at the end if still running."""
    from workers import start_worker  # tests/workers.py imports this module

    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(worker_id: str, *extra: str, env: dict | None = None) -> subprocess.Popen[bytes]:
        log = tmp_path / f"{worker_id}.log"
        procs[worker_id] = start_worker(
            redis_server.url, dep.namespace, worker_id, log, *extra, env=env
        )
        return procs[worker_id]

    yield start
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key (PEM files), for HTTPS tests."""
    d = tmp_path_factory.mktemp("fuzz-pki")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem",
         "-out", "c.pem", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        cwd=d, check=True, capture_output=True,
    )  # fmt: skip
    return d / "c.pem", d / "k.pem"
