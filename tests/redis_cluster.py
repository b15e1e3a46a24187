"""Test helper: a real local Redis Cluster (masters + replicas) on free loopback ports."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import waits
from shardsched.runtime.redis_server import cluster_node_args, free_cluster_port


@dataclass
class LocalCluster:
    root: Path
    masters: int = 3
    replicas: int = 1
    node_timeout_ms: int = 1000
    ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: dict[int, waits.LogWatch] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def _start(self, port: int) -> None:
        data = self.root / str(port)
        data.mkdir(parents=True, exist_ok=True)
        args = cluster_node_args(port, data, self.node_timeout_ms)
        args += [*waits.NOTIFY_ARGS, "--logfile", ""]  # its log on stdout: "Ready to ..."
        args += ["--repl-diskless-sync-delay", "0"]  # a replica's first sync now, not in 5 s
        self._logs[port] = waits.start_logged(args, data / "redis.log")
        self.procs[port] = self._logs[port].proc

    def cli(self, port: int, *args: str) -> str:
        out = subprocess.run(
            ["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=30
        )
        return out.stdout

    def start(self) -> None:
        self.ports = [free_cluster_port() for _ in range(self.masters * (1 + self.replicas))]
        for port in self.ports:
            self._start(port)
        for port in self.ports:
            self._logs[port].wait_for_sync("Ready to accept connections", timeout=10)
            waits.watch(f"redis://127.0.0.1:{port}/0")
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in self.ports),
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            capture_output=True,
            check=True,
            timeout=60,
        )
        self.wait_ok()
        self.wait_replicas_synced()

    def wait_replicas_synced(self, timeout: float = 30) -> None:
        """Until every replica has its master's data. A replica that never finished its
        first sync refuses to fail over ("Disconnected from master for longer than
        allowed"), so a test that kills a master before then sees no promotion at all."""
        for port, proc in self.procs.items():
            if proc.poll() is None and "role:slave" in self.cli(port, "INFO", "replication"):
                self._logs[port].wait_for_sync("MASTER <-> REPLICA sync: Finished", timeout)

    def wait_promoted(self, victim: int, timeout: float = 30) -> None:
        """After killing master ``victim``: until its replica says it is the new master
        (its log: "Failover election won") and the cluster state is ok again."""
        replicas = [
            p
            for p, proc in self.procs.items()
            if proc.poll() is None and f"master_port:{victim}" in self.cli(p, "INFO", "replication")
        ]
        assert replicas, f"no replica of {victim}"
        self._logs[replicas[0]].wait_for_sync("Failover election won", timeout)
        self.wait_ok(timeout)

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every live node says its cluster state is ok: each node's log says when
        it changes ("Cluster state changed: ok")."""
        deadline = time.monotonic() + timeout
        for port, proc in self.procs.items():
            if proc.poll() is not None:
                continue
            mark = self._logs[port].mark()  # before the look: no change falls in between
            if "cluster_state:ok" in self.cli(port, "CLUSTER", "INFO"):
                continue
            left = max(0.1, deadline - time.monotonic())
            self._logs[port].wait_for_sync("Cluster state changed: ok", left, start=mark)

    def master_ids(self) -> dict[int, str]:
        """Port -> node id of every live master (CLUSTER NODES)."""
        out = self.cli(self.live_port(), "CLUSTER", "NODES")
        masters = {}
        for line in out.splitlines():
            node_id, address, flags = line.split()[:3]
            if "master" in flags and "fail" not in flags:
                masters[int(address.split(":")[1].split("@")[0])] = node_id
        return masters

    def master_ports(self) -> list[int]:
        return list(self.master_ids())

    def live_port(self) -> int:
        return next(p for p, proc in self.procs.items() if proc.poll() is None)

    def kill(self, port: int) -> None:
        waits.unwatch(f"redis://127.0.0.1:{port}/0")
        proc = self.procs[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for port in self.procs:
            waits.unwatch(f"redis://127.0.0.1:{port}/0")
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
