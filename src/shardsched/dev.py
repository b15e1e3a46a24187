"""``shardsched dev``: everything in one command, on an embedded redis-server.

Starts redis-server in the data dir (AOF on with fsync always, noeviction, loopback only)
unless ``--redis`` is given, one node owning every shard with the HTTP API, and
``--workers`` worker processes. Every child is held on this process's
:mod:`~shardsched.runtime.lifeline`, so even a kill -9 of ``dev`` takes them along, and Ctrl-C /
SIGTERM stops them all in order, so nothing is left behind either way.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from shardsched import ops, service
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.errors import ConfigError
from shardsched.ops import tokens
from shardsched.ops.retention import RetentionDefaults
from shardsched.router.guards import AccessPolicy
from shardsched.runtime.lifeline import child_env, lifeline
from shardsched.store.redis import Redis, RedisConnectionError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_args(port: int, data_dir: Path, fsync: str = "always") -> list[str]:
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    args = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--protected-mode",
        "yes",
        "--dir",
        str(data_dir),
        "--maxmemory-policy",
        "noeviction",
        # A job hash holds its spec JSON: let it stay a compact listpack (about 700 B a
        # job instead of 1,100 at 500,000 jobs; bench/RESULTS.md).
        "--hash-max-listpack-value",
        "1024",
        # A completion deletes its ready-stream entry, and XDEL walks the entry's node from
        # its start: 16 entries a node, not 100, cut a burst's complete.lua by a quarter
        # (90,400 -> 68,900 instructions a run, `bench instructions`; bench/RESULTS.md).
        "--stream-node-max-entries",
        "16",
        "--save",
        "",
        "--daemonize",
        "no",
        "--logfile",
        str(data_dir / "redis.log"),
    ]
    if fsync == "off":
        args += ["--appendonly", "no"]
    else:
        args += ["--appendonly", "yes", "--appendfsync", fsync]
    return args


def free_cluster_port() -> int:
    """A free loopback port whose cluster bus port (port + 10000) is free as well."""
    while True:
        port = random.randint(20000, 55000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port


def cluster_node_args(port: int, data_dir: Path, node_timeout_ms: int = 1000) -> list[str]:
    """One Redis Cluster node: the embedded server's settings plus cluster mode."""
    return [
        *redis_server_args(port, data_dir, "always"),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        str(data_dir / "nodes.conf"),
        "--cluster-node-timeout",
        str(node_timeout_ms),
    ]


async def start_cluster(masters: int, root: Path) -> tuple[list[trio.Process], str]:
    """``masters`` cluster nodes on loopback, joined by ``redis-cli --cluster create``;
    returns the processes and the redis+cluster:// URL."""
    ports = [free_cluster_port() for _ in range(masters)]
    procs = []
    for port in ports:
        node_dir = root / str(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        procs.append(await spawn(cluster_node_args(port, node_dir), stdout=subprocess.DEVNULL))
    for port in ports:
        await wait_for_redis(f"redis://127.0.0.1:{port}/0")
    create = await trio.run_process(
        ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports), "--cluster-yes"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    if create.returncode != 0:
        raise ConfigError(f"redis-cli --cluster create failed: {create.stderr.decode()[-500:]}")
    for port in ports:
        redis = Redis(f"redis://127.0.0.1:{port}/0", size=1)
        try:
            with trio.fail_after(30):
                while b"cluster_state:ok" not in await redis.execute("CLUSTER", "INFO"):
                    await trio.sleep(0.1)
        finally:
            await redis.aclose()
    return procs, "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)


async def wait_for_redis(url: str, timeout: float = 10.0) -> None:
    redis = Redis(url, size=1, retry_for=timeout, log_failures=False)  # it is starting up
    try:
        await redis.execute("PING")
    finally:
        await redis.aclose()


async def stop_process(proc: trio.Process, grace: float = 5.0) -> None:
    """SIGTERM, wait up to ``grace``, then SIGKILL; shielded so it runs during cancellation."""
    with trio.CancelScope(shield=True):
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            with trio.move_on_after(grace):
                await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        lifeline().release(proc.pid, group=False)


async def spawn(
    args: Sequence[str], env: dict[str, str] | None = None, **kwargs: Any
) -> trio.Process:
    """Start a child that lives until we stop it or this process dies (see lifeline)."""
    proc: trio.Process = await trio.lowlevel.open_process(
        list(args), env={**child_env(), **(env or {})}, **kwargs
    )
    lifeline().hold(proc.pid, group=False)
    return proc


TOKEN_FILE = "token"
#: Where dev writes the URL of its Redis (a random port), for the SDK and the tools.
REDIS_URL_FILE = "redis-url"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by this user only (0600): it may hold a password."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


DEV_TOKEN_NAME = "dev-admin"


async def ensure_admin_token(redis: Redis, dep: ops.Deployment, data_dir: Path) -> Path:
    """The data dir's admin token: made on first start (or when the one on file no longer
    works), written 0600. Only the file holds the secret; Redis keeps its hash."""
    path = data_dir / TOKEN_FILE
    if path.exists():
        known = await ops.drive_async(tokens.authenticate(dep, path.read_text().strip()), redis)
        if known is not None:
            return path
    await ops.drive_async(tokens.forget_token(dep, DEV_TOKEN_NAME), redis)
    request = TokenRequest(name=DEV_TOKEN_NAME, scopes=[Scope.ADMIN])
    created = await ops.drive_async(tokens.create_token(dep, request, "shardsched dev"), redis)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(created.token + "\n")
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC
    return path


async def run_dev(
    *,
    http: str,
    data_dir: Path,
    redis_url: str | None,
    shards: int | None,
    workers: int,
    concurrency: int,
    namespace: str,
    cluster: int = 0,
    policy: AccessPolicy | None = None,
    tls: service.TlsFiles | None = None,
    archive: str | None = None,
    retention: RetentionDefaults | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    policy = policy or service.access_policy(http)
    children: list[trio.Process] = []
    redis_proc: trio.Process | None = None
    cluster_procs: list[trio.Process] = []
    try:
        if redis_url is None and cluster:
            # a fresh cluster each time: its nodes.conf holds this run's ports
            root = data_dir.resolve() / "cluster" / str(os.getpid())
            cluster_procs, redis_url = await start_cluster(cluster, root)
        elif redis_url is None:
            data_dir.mkdir(parents=True, exist_ok=True)
            port = free_port()
            redis_proc = await spawn(
                redis_server_args(port, data_dir.resolve()), stdout=subprocess.DEVNULL
            )
            redis_url = f"redis://127.0.0.1:{port}/0"
            try:
                await wait_for_redis(redis_url)
            except RedisConnectionError as exc:
                raise ConfigError(
                    f"embedded redis-server did not start (see {data_dir / 'redis.log'}): {exc}"
                ) from None
        redis, dep = await service.open_redis(redis_url, namespace, shards, archive=archive)
        await service.check_redis_config(redis, allow_eviction=False)
        write_private(data_dir / REDIS_URL_FILE, redis_url + "\n")  # for the SDK: Client(...)
        token_hint = ""
        if policy.auth:
            token_file = await ensure_admin_token(redis, dep, data_dir)
            token_hint = (
                f"admin token in {token_file} (mode 0600): the CLI reads it from there when "
                "run in this directory, or set SHARDSCHED_TOKEN; curl needs "
                f'-H "Authorization: Bearer $(cat {token_file})"\n'
            )
        for i in range(workers):
            children.append(
                await spawn(
                    [
                        sys.executable,
                        "-m",
                        "shardsched",
                        "worker",
                        "--namespace",
                        namespace,
                        "--concurrency",
                        str(concurrency),
                        "--worker-id",
                        f"dev-worker-{i + 1}",
                    ],
                    env={"SHARDSCHED_REDIS_URL": redis_url},  # not argv: ps shows argv
                    stdout=subprocess.DEVNULL,
                )
            )
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(
                lambda task_status: service.run_node(
                    redis,
                    dep,
                    http=http,
                    node_id="dev-node",
                    policy=policy,
                    tls=tls,
                    retention=retention,
                    archive=archive,
                    task_status=task_status,
                )
            )
            api = binds[0] if binds else f"http://{http}"
            task_status.started(
                f"{token_hint}shardsched dev ready: API {api}/api/v1  (redis {redis_url})"
            )
    finally:
        for child in children:
            await stop_process(child)
        if redis_proc is not None:
            await stop_process(redis_proc, grace=10.0)
        for proc in cluster_procs:
            await stop_process(proc, grace=10.0)


def main(
    args: argparse.Namespace,
    archive: str | None = None,
    retention: RetentionDefaults | None = None,
) -> None:
    """``shardsched dev``: ``archive`` and ``retention`` come from the CLI's flags."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    service.run_until_signal(
        lambda task_status: run_dev(
            http=args.http,
            data_dir=Path(args.data_dir),
            redis_url=args.redis,
            shards=args.shards,
            workers=args.workers,
            concurrency=args.concurrency,
            namespace=args.namespace,
            cluster=args.cluster,
            policy=service.access_policy(
                args.http,
                insecure_no_auth=args.insecure_no_auth,
                allow_hosts=args.allow_host,
                allow_origins=args.allow_origin,
                metrics_auth=args.metrics_auth,
            ),
            tls=None if args.certfile is None else service.TlsFiles(args.certfile, args.keyfile),
            archive=archive,
            retention=retention,
            task_status=task_status,
        ),
        lambda line: line,
    )
