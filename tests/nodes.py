"""Test helper: node processes started, killed, stopped and continued by PID."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.ops.deployment.cluster import ClusterView, cluster_view
from shardsched.ops.history import audit
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

    return await wait_until(settled, timeout=timeout)


async def run_audit(redis: Redis, dep: ops.Deployment, settle_s: float = 2.0) -> audit.AuditReport:
    return await drive_async(audit.audit(dep, settle_s=settle_s), redis)


async def refused(redis: Redis, dep: ops.Deployment) -> tuple[int, int]:
    v = await view(redis, dep)
    return sum(s.refused_fire for s in v.shards), sum(s.refused_renew for s in v.shards)


async def fires(redis: Redis, dep: ops.Deployment, job_ids: list[str]) -> int:
    """How many runs these jobs have fired so far (their run indexes)."""
    replies = await redis.pipeline([("ZCARD", dep.keys_for(j).runs_of(j)) for j in job_ids])
    return sum(int(n) for n in replies)


async def fired_at_least(
    redis: Redis, dep: ops.Deployment, job_ids: list[str], total: int, timeout: float = 30
) -> int:
    """Until these jobs have fired ``total`` runs between them; the count then."""

    async def enough() -> int:
        n = await fires(redis, dep, job_ids)
        return n if n >= total else 0

    return await wait_until(enough, timeout=timeout)


async def fired_more(
    redis: Redis, dep: ops.Deployment, job_ids: list[str], more: int, timeout: float = 30
) -> int:
    """Until these jobs fire ``more`` runs than they have now ("a while of firing")."""
    return await fired_at_least(
        redis, dep, job_ids, await fires(redis, dep, job_ids) + more, timeout
    )


async def settled_audit(
    redis: Redis, dep: ops.Deployment, up_to_ms: int | None = None, timeout: float = 30
) -> audit.AuditReport:
    """The audit of every tick due up to ``up_to_ms`` (default: now), once none of them is
    still waiting to fire: each is judged fired, skipped or missing. Waits on the node
    catching up, not on a settle margin."""
    mark = await redis.time_ms() if up_to_ms is None else up_to_ms

    async def settled() -> audit.AuditReport | None:
        settle_s = max(0, await redis.time_ms() - mark) / 1000
        report = await run_audit(redis, dep, settle_s=settle_s)
        return report if report.pending == 0 else None

    return await wait_until(settled, timeout=timeout)
