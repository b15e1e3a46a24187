"""Who is alive and who owns what: the registry and the leases, read in one operation."""

from __future__ import annotations

from datetime import datetime

import msgspec

from shardsched.core.instants import from_ms
from shardsched.core.queues import DEFAULT_QUEUE
from shardsched.store.calls import Call, Op, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.records import NodeInfo, WorkerInfo


class NodeView(msgspec.Struct):
    node_id: str
    expires_at: datetime
    http: str | None
    started_at: datetime | None
    shards: list[int]
    lag_p99_1m: float | None = None  #: trigger lag p99 of its firings in the last minute (s)
    fired_1m: int = 0  #: runs it fired in the last minute
    lag_p50_1m: float | None = None  #: and their median (s)


class ShardView(msgspec.Struct):
    shard: int
    owner: str | None
    epoch: int
    lease_expires_at: datetime | None
    refused_fire: int
    refused_renew: int
    lease_reclaims: int = 0
    dag_stalled: int = 0  #: DAG task runs released and unclaimed past their DAG's SLA


class WorkerView(msgspec.Struct):
    worker_id: str
    expires_at: datetime
    capacity: int
    capacity_free: int
    running: int
    completed: int
    draining: bool
    started_at: datetime | None
    overrunning: int = 0  #: runs it sees running past their job's usual duration
    queues: list[str] = msgspec.field(default_factory=lambda: [DEFAULT_QUEUE])  #: it serves


class WorkerList(msgspec.Struct):
    workers: list[WorkerView]


_worker_info_decoder = msgspec.json.Decoder(WorkerInfo)
_info_decoder = msgspec.json.Decoder(NodeInfo)


def _live(members_key: str, info_key: str) -> Op:
    """A registry's live members (registration not lapsed by the server's clock): the
    server's clock, and (member id, expiry ms, raw info JSON) for each."""
    now, members, infos = yield [
        Call(("TIME",)),
        Call(("ZRANGE", members_key, 0, -1, "WITHSCORES")),
        Call(("HGETALL", info_key)),
    ]
    now_ms = server_ms(now)
    info_of = {infos[i].decode(): infos[i + 1] for i in range(0, len(infos), 2)}
    live = []
    for i in range(0, len(members), 2):
        member, expiry = members[i].decode(), int(float(members[i + 1]))
        if expiry >= now_ms:
            live.append((member, expiry, info_of.get(member, b"{}")))
    return now_ms, live


def list_workers(dep: Deployment) -> Op:
    """Live workers (registration not lapsed by the server's clock) and their slots."""
    _now_ms, live = yield from _live(dep.globals.workers, dep.globals.worker_info)
    views = []
    for worker_id, expiry, raw in live:
        info = _worker_info_decoder.decode(raw)
        views.append(
            WorkerView(
                worker_id=worker_id,
                expires_at=from_ms(expiry),
                capacity=info.capacity,
                capacity_free=info.capacity_free,
                running=info.running,
                completed=info.completed,
                draining=info.draining,
                started_at=from_ms(info.started_ms) if info.started_ms else None,
                overrunning=info.overrunning,
                queues=info.queues,
            )
        )
    return WorkerList(views)


class ClusterView(msgspec.Struct):
    now: datetime
    nodes: list[NodeView]
    shards: list[ShardView]


def cluster_view(dep: Deployment) -> Op:
    now_ms, live = yield from _live(dep.globals.nodes, dep.globals.node_info)
    node_views = []
    for node_id, expiry, raw in live:
        info = _info_decoder.decode(raw)
        node_views.append(
            NodeView(
                node_id=node_id,
                expires_at=from_ms(expiry),
                http=info.http,
                started_at=from_ms(info.started_ms) if info.started_ms else None,
                shards=info.shards,
                lag_p99_1m=info.lag_p99_1m,
                fired_1m=info.fired_1m,
                lag_p50_1m=info.lag_p50_1m,
            )
        )
    calls = []
    for s in range(dep.n_shards):
        sk = dep.shard(s)
        calls += [
            Call(("GET", sk.owner)),
            Call(("GET", sk.epoch)),
            Call(("PTTL", sk.owner)),
            Call(
                (
                    "HMGET",
                    sk.stats,
                    "refused_fire",
                    "refused_renew",
                    "lease_reclaims",
                    "dag_stalled",
                )
            ),
        ]
    replies = yield calls
    shard_views = []
    for s in range(dep.n_shards):
        owner, epoch, pttl, (rf, rr, reclaims, stalled) = replies[4 * s : 4 * s + 4]
        shard_views.append(
            ShardView(
                shard=s,
                owner=owner.decode() if owner else None,
                epoch=int(epoch or 0),
                lease_expires_at=from_ms(now_ms + pttl) if owner and pttl > 0 else None,
                refused_fire=int(rf or 0),
                refused_renew=int(rr or 0),
                lease_reclaims=int(reclaims or 0),
                dag_stalled=int(stalled or 0),
            )
        )
    return ClusterView(now=from_ms(now_ms), nodes=node_views, shards=shard_views)
