"""The fault campaign's cast: a fleet of node and worker processes on one Redis, a TCP
proxy that can freeze a node's connection (a partition), and the scene a fault acts on."""

from __future__ import annotations

import glob
import selectors
import signal
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardsched.bench.harness import BenchRedis, Procs

LEASE_TTL_S = 2.0
RENEW_EVERY_S = 0.5
#: libfaketime from Debian's package (installed by scripts/setup.sh for the clock scenario).
FAKETIME_LIBS = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))


def read_record(record: Path) -> tuple[Counter[str], dict[str, list[int]]]:
    """The record the jobs wrote themselves, lines of ``<run id> <start ms>[ <execution
    id>]`` in the files of ``record``: how many times each run executed, and its starts."""
    executions: Counter[str] = Counter()
    starts: dict[str, list[int]] = {}
    for path in record.iterdir():
        for line in path.read_text().splitlines():
            rid, ms, *_execution = line.split(" ")
            executions[rid] += 1
            starts.setdefault(rid, []).append(int(ms))
    return executions, starts


def lost_and_after(
    runs: dict[str, int | None], executions: Counter[str], starts: dict[str, list[int]]
) -> tuple[int, int]:
    """Of ``runs`` (run id -> its recorded finish, ms, if any): how many the record never
    saw executed, and how many executions started after the run's recorded finish."""
    lost = sum(1 for rid in runs if executions[rid] == 0)
    after = sum(
        1
        for rid, finished in runs.items()
        if finished is not None
        for started in starts.get(rid, [])[1:]
        if started > finished
    )
    return lost, after


class FreezableProxy:
    """A TCP proxy on loopback in front of Redis that can stop carrying bytes: a network
    cut as the node sees it (connections stay open, nothing arrives, calls hang), then
    healed. One thread, a selector; only loopback."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.frozen = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.listener, selectors.EVENT_READ, None)
        peers: dict[socket.socket, socket.socket] = {}
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self.listener:
                    client, _ = self.listener.accept()
                    upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
                    for a, b in ((client, upstream), (upstream, client)):
                        a.setblocking(False)
                        peers[a] = b
                        sel.register(a, selectors.EVENT_READ, None)
                    continue
                if self.frozen.is_set():
                    continue  # leave it unread: the bytes wait in the kernel
                try:
                    data = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                other = peers.get(sock)
                if not data or other is None:
                    for s in (sock, other):
                        if s is not None and s in peers:
                            sel.unregister(s)
                            peers.pop(s)
                            s.close()
                    continue
                other.setblocking(True)
                try:
                    other.sendall(data)
                except OSError:
                    pass
                other.setblocking(False)
            if self.frozen.is_set():
                time.sleep(0.02)  # readable sockets stay readable: do not spin
        for sock in peers:
            sock.close()
        self.listener.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@dataclass
class Fleet:
    """The processes of one scenario (the harness's :class:`Procs`), each with its own log
    file, and the ones that exited on their own."""

    url: str
    namespace: str
    log_dir: Path
    procs: Procs = field(default_factory=Procs)
    exits: dict[str, int] = field(default_factory=dict)  #: unexpected exits seen

    #: name -> how many times it was started (its log holds one ready line per start)
    starts: Counter[str] = field(default_factory=Counter)

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        log = self.log_dir / f"{name}.log"
        env = {"PYTHONUNBUFFERED": "1", **self.env, **(env or {})}
        self.procs.start(name, *args, log=log, env=env)
        self.starts[name] += 1

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every process running has printed its ready line (``node ready``, ``worker
        ready``), as a deploy waits for readiness: on a loaded box a start can take seconds,
        and a fault acted on a process still importing tests nothing (a SIGTERM then ends
        it before its handler is installed)."""
        deadline = time.monotonic() + timeout
        waiting = set(self.procs.procs)
        while waiting:
            self.check()
            for name in list(waiting):
                text = (self.log_dir / f"{name}.log").read_text(errors="replace")
                kind = "node" if name.startswith("node") else "worker"
                if text.count(f"{kind} ready") >= self.starts[name] or name in self.exits:
                    waiting.discard(name)
            if waiting and time.monotonic() > deadline:
                raise TimeoutError(f"not ready after {timeout:.0f} s: {sorted(waiting)}")
            time.sleep(0.1)  # polls the logs until the deadline above

    def node(
        self,
        name: str,
        url: str | None = None,
        env: dict[str, str] | None = None,
        http: str | None = None,
    ) -> None:
        """A node; with ``http`` (HOST:PORT) serving the API there too."""
        self.start(
            name,
            "node",
            *("--redis", url or self.url, "--namespace", self.namespace, "--node-id", name),
            *(("--http", http) if http else ("--no-http",)),
            *("--lease-ttl", str(LEASE_TTL_S), "--renew-every", str(RENEW_EVERY_S)),
            *("--log-level", "INFO", *self.node_args),
            env=env,
        )

    #: extra arguments of every worker (``--import`` of a bench's handler)
    worker_args: tuple[str, ...] = ()
    #: extra arguments of every node (the nemesis's ``--durable-replicas``)
    node_args: tuple[str, ...] = ()
    #: the environment of every process started (a bench handler's record directory)
    env: dict[str, str] = field(default_factory=dict)
    #: (name, seconds from SIGTERM to exit, exit code) of each graceful restart
    restarts: list[tuple[str, float, int]] = field(default_factory=list)

    def worker(self, name: str) -> None:
        self.start(
            name,
            "worker",
            *("--redis", self.url, "--namespace", self.namespace, "--worker-id", name),
            *("--concurrency", "32", "--log-level", "INFO", *self.worker_args),
        )

    def restart(self, *names: str) -> None:
        """A deploy's restart: SIGTERM each of ``names`` at once, and start each again as
        soon as it has exited (a node as a node, a worker as a worker). A stop that does
        not exit 0 is an exit the scenario reports."""
        began = time.monotonic()
        for name in names:
            self.procs.procs[name].send_signal(signal.SIGTERM)
        for name in names:
            code = self.procs.reap(name)
            self.restarts.append((name, round(time.monotonic() - began, 3), code))
            if code != 0:
                self.exits[name] = code
            (self.node if name.startswith("node") else self.worker)(name)

    def signal(self, name: str, sig: int) -> None:
        self.procs.procs[name].send_signal(sig)

    def kill(self, name: str) -> None:
        """kill -9 on purpose: not an unexpected exit."""
        self.procs.kill(name)

    def check(self) -> None:
        for name, proc in self.procs.procs.items():
            if proc.poll() is not None and name not in self.exits:
                self.exits[name] = proc.returncode

    def stop_all(self) -> None:
        self.check()
        self.procs.stop_all()


@dataclass
class Scene:
    """What a fault gets to act on."""

    server: BenchRedis
    fleet: Fleet
    r: Any  #: redis-py client on the scenario's server

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.fleet.check()
            time.sleep(min(left, 0.2))
