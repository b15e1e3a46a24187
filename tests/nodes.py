"""Test helper: node processes started, killed, stopped and continued by PID."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.ops import audit
from shardsched.ops.cluster import ClusterView, cluster_view
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis

LEASE_TTL_S = 2.0
RENEW_EVERY_S = 0.5


@dataclass
class Nodes:
    url: str
    namespace: str
    shards: int
    log_dir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, node_id: str, lease_ttl_s: float = LEASE_TTL_S) -> None:
        log = (self.log_dir / f"{node_id}.log").open("ab")
        self.procs[node_id] = subprocess.Popen(
            shardsched_cmd(
                "node",
                "--redis",
                self.url,
                "--namespace",
                self.namespace,
                "--node-id",
                node_id,
                "--shards",
                str(self.shards),
                "--no-http",
                "--lease-ttl",
                str(LEASE_TTL_S),
                "--renew-every",
                str(RENEW_EVERY_S),
                "--log-level",
                "INFO",
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )
        log.close()

    def kill(self, node_id: str) -> None:
        proc = self.procs.pop(node_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def signal(self, node_id: str, sig: int) -> None:
        self.procs[node_id].send_signal(sig)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


async def view(redis: Redis, dep: ops.Deployment) -> ClusterView:
    return await drive_async(cluster_view(dep), redis)


def owners(v: ClusterView) -> Counter[str | None]:
    return Counter(s.owner for s in v.shards)


async def wait_owned_by(
    redis: Redis, dep: ops.Deployment, nodes: set[str], timeout: float = 20
) -> ClusterView:
    """Until every shard is owned and the owners are exactly ``nodes``, each with a fair share."""

    async def settled() -> ClusterView | None:
        v = await view(redis, dep)
        count = owners(v)
        if set(count) != nodes:
            return None
        return v if max(count.values()) - min(count.values()) <= 1 else None

    return await wait_until(settled, timeout=timeout, every=0.1)


async def run_audit(redis: Redis, dep: ops.Deployment, settle_s: float = 2.0) -> audit.AuditReport:
    return await drive_async(audit.audit(dep, settle_s=settle_s), redis)


async def refused(redis: Redis, dep: ops.Deployment) -> tuple[int, int]:
    v = await view(redis, dep)
    return sum(s.refused_fire for s in v.shards), sum(s.refused_renew for s in v.shards)
