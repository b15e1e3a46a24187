"""The servers ``dev`` and the tests start on loopback: an embedded redis-server (AOF on,
noeviction, loopback only, optionally behind a password in a 0600 config file), a Redis
Cluster of them, and the children every one of them is: held on this process's lifeline,
so even a kill -9 of their parent takes them along."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from shardsched.core.errors import ConfigError
from shardsched.runtime.lifeline import child_env, lifeline
from shardsched.store.redis import Redis


def free_port() -> int:
    """A loopback port free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports free right now: held together while they are chosen,
    since one at a time the kernel may hand out the same port twice (a sentinel group's
    replica and sentinel once got one port, and the sentinel could not bind)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def redis_server_args(
    port: int, data_dir: Path, fsync: str = "always", config_file: Path | None = None
) -> list[str]:
    """The embedded server's command line; ``config_file`` (read first, the arguments
    after it win) carries what must not show in ``ps``: the password."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    args = [
        binary,
        *([str(config_file)] if config_file is not None else []),
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
        # After 1 s of one script, Redis answers BUSY to the others, and a node ends a
        # runaway read-only script (SCRIPT KILL) long before a 5 s lease lapses.
        "--busy-reply-threshold",
        "1000",
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
