"""What every benchmark needs: a redis-server of its own, processes it started by PID and
whose ready line it waited for, a client on its Redis (one server or a cluster), the
server's clock, and the instant a burst is due."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import redis as redis_py

from shardsched.runtime.lifeline import child_env, lifeline
from shardsched.runtime.redis_server import free_port, redis_server_args


@dataclass
class BenchRedis:
    """A redis-server started for one benchmark (AOF per ``fsync``: always, everysec, off)."""

    fsync: str = "always"
    port: int = field(default_factory=free_port)
    extra: tuple[
        str, ...
    ] = ()  #: more redis-server options, e.g. ("--hash-max-listpack-value", "64")
    proc: subprocess.Popen[bytes] | None = None
    dir: Path | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (again, after :meth:`kill`: same port, same data dir)."""
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="shardsched-bench-"))
        self.proc = subprocess.Popen(
            [*redis_server_args(self.port, self.dir, self.fsync), *self.extra],
            stdout=subprocess.DEVNULL,
            env=child_env(),
        )
        lifeline().hold(self.proc.pid, group=False)
        client = redis_py.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis_py.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        client.close()

    def kill(self) -> None:
        """kill -9 (the AOF keeps every acknowledged write under fsync ``always``)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        lifeline().release(self.proc.pid, group=False)

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        if self.proc is not None:
            lifeline().release(self.proc.pid, group=False)


@contextmanager
def bench_redis(
    url: str | None, fsync: str = "always", extra: tuple[str, ...] = ()
) -> Iterator[str]:
    """Use ``url`` if given, else start (and finally stop) a redis-server of our own."""
    if url:
        yield url
        return
    server = BenchRedis(fsync, extra=extra)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def replicas_of(url: str, n: int, fsync: str) -> Iterator[None]:
    """``n`` replicas (loopback) of the bench's own Redis at ``url``, in sync before the
    bench goes on: the durable mode's burst measured beside the same one without it."""
    servers: list[BenchRedis] = []
    try:
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        for _ in range(n):
            servers.append(BenchRedis(fsync, extra=("--replicaof", "127.0.0.1", str(port))))
            servers[-1].start()
        primary = redis_py.Redis(port=port)
        deadline = time.monotonic() + 60
        while (
            sum(
                1
                for key, value in primary.info("replication").items()
                if key.startswith("slave")
                and isinstance(value, dict)
                and value["state"] == "online"
            )
            < n
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n} replica(s) did not connect within 60 s")
            time.sleep(0.05)  # a replica's first sync: polled
        primary.close()
        yield
    finally:
        for server in servers:
            server.stop()


class Procs:
    """Child processes of a benchmark, ended by PID on the way out."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen[Any]] = {}

    def start(
        self, name: str, *args: str, log: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``shardsched *args`` (output to ``log``, else discarded), held on the
        lifeline."""
        out: IO[bytes] | int = log.open("ab") if log is not None else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "shardsched", *args],
                stdout=out,
                stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
                env=child_env(env),
            )
        finally:
            if not isinstance(out, int):
                out.close()
        lifeline().hold(proc.pid, group=False)
        self.procs[name] = proc
        return proc

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        proc.wait()
        lifeline().release(proc.pid, group=False)

    def reap(self, name: str, timeout: float = 60.0) -> int:
        """Wait for ``name`` to exit (after a signal sent elsewhere); its exit code."""
        proc = self.procs.pop(name)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        lifeline().release(proc.pid, group=False)
        return code

    def stop_all(self, sig: int = signal.SIGTERM) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a stopped process cannot act on sig
                proc.send_signal(sig)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            lifeline().release(proc.pid, group=False)
        self.procs.clear()

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    ordered = sorted(values)

    def pct(p: float) -> float:
        index = min(len(ordered) - 1, max(0, round(p * len(ordered) + 0.5) - 1))
        return round(ordered[index], 4)

    return {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": round(ordered[-1], 4)}


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def per_second(instants_ms: list[int], origin_ms: int) -> list[int]:
    """How many of the instants fall in each whole second from ``origin_ms`` on (a
    histogram: index k counts [origin + k s, origin + k + 1 s))."""
    counts: list[int] = []
    for t in instants_ms:
        k = max(0, (t - origin_ms) // 1000)
        counts.extend([0] * (k + 1 - len(counts)))
        counts[k] += 1
    return counts


def bench_client(url: str) -> Any:
    """redis-py on the bench's Redis: one server, or a cluster (``redis+cluster://``)."""
    if url.startswith("redis+cluster://"):
        from shardsched.store.redis.cluster import parse_cluster_url

        seeds = parse_cluster_url(url)
        nodes = [redis_py.cluster.ClusterNode(u.host, u.port) for u in seeds]
        return redis_py.RedisCluster(startup_nodes=nodes)
    return redis_py.Redis.from_url(url)


def server_ms(r: redis_py.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def start_ready(
    procs: Procs, name: str, *args: str, timeout: float = 60, profile: str | None = None
) -> None:
    """Start a shardsched process and wait for its ready line (under py-spy if profiling)."""
    cmd = [sys.executable, "-m", "shardsched", *args]
    if profile:
        Path(profile).mkdir(parents=True, exist_ok=True)
        spy = str(Path(sys.executable).with_name("py-spy"))
        out = str(Path(profile) / f"{name}.txt")
        cmd = [spy, "record", "-r", "500", "--format", "raw", "-o", out, "--", *cmd]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
        text=True,
    )
    lifeline().hold(proc.pid, group=False)
    procs.procs[name] = proc
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{name} exited before it was ready")
        if "ready" in line:
            return
    raise TimeoutError(f"{name} not ready in {timeout} s")


def plan_boundary(r: redis_py.Redis, mode: str, lead_s: float) -> int:
    """The instant every job is due: the next minute boundary far enough ahead, or now+lead."""
    now = server_ms(r)
    if mode == "once":
        return (now + round(lead_s * 1000)) // 1000 * 1000 + 1000
    boundary = (now // 60_000 + 1) * 60_000
    if boundary - now < lead_s * 1000:
        boundary += 60_000
    return boundary
