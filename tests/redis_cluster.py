"""Test helper: a real local Redis Cluster (masters + replicas) on free loopback ports."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from shardsched.runtime.redis_server import cluster_node_args, free_cluster_port


@dataclass
class LocalCluster:
    root: Path
    masters: int = 3
    replicas: int = 1
    node_timeout_ms: int = 1000
    ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def _start(self, port: int) -> None:
        data = self.root / str(port)
        data.mkdir(parents=True, exist_ok=True)
        args = cluster_node_args(port, data, self.node_timeout_ms)
        self.procs[port] = subprocess.Popen(args, stdout=subprocess.DEVNULL)

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
            deadline = time.monotonic() + 10
            while self.cli(port, "PING").strip() != "PONG":
                assert time.monotonic() < deadline, f"redis on {port} did not start"
                time.sleep(0.02)
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

    def wait_ok(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        live = [p for p, proc in self.procs.items() if proc.poll() is None]
        while True:
            states = [self.cli(p, "CLUSTER", "INFO") for p in live]
            if all("cluster_state:ok" in s for s in states):
                return
            assert time.monotonic() < deadline, "cluster did not reach state ok"
            time.sleep(0.1)

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
        proc = self.procs[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
