"""One screen of the deployment's health: ``shardsched status`` and ``GET /api/v1/status``.

Read from Redis (the registries, every shard's lease, counters and queues), so it answers
the same from any process and needs no node to be up. The Prometheus gauges of the
cluster's state are set from the same reading (:func:`shardsched.runtime.metrics.refresh_cluster`).
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from shardsched.core.instants import from_ms
from shardsched.core.queues import DEFAULT_QUEUE, parse_stored
from shardsched.ops.deployment.cluster import NodeView, WorkerView, cluster_view, list_workers
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment, Durability
from shardsched.store.keys import CONSUMER_GROUP
from shardsched.store.records import Supervised

#: A timer entry this far past due means firing is behind.
OVERDUE_MS = 60_000
#: A fired run still waiting for a worker after this long is stranded (as in the audit).
STRANDED_AFTER_MS = 300_000
#: Stranded runs counted per shard at most (the status stays cheap).
STRANDED_COUNT_CAP = 1000


class ShardStatus(msgspec.Struct):
    shard: int
    owner: str | None
    live: bool  #: owned by a node with a live heartbeat
    epoch: int
    ready: int  #: fired, not yet claimed
    pending: int  #: claimed, not yet completed
    overdue: int  #: timer entries more than 60 s past due
    dead_letter: int
    missed: int  #: ticks found past time + grace (ever)
    lease_reclaims: int
    dag_stalled: int
    quarantined: int = 0  #: jobs paused by the owner because they could not be planned
    #: fired runs no worker took for STRANDED_AFTER_MS (counted up to STRANDED_COUNT_CAP)
    stranded: int = 0
    failed_1h: int = 0  #: runs that ended failed or dead_letter in the last hour


class QueueStatus(msgspec.Struct):
    """One queue (core/queues.py) over every shard: what waits on it, and who serves it."""

    queue: str
    ready: int  #: fired, not yet claimed
    running: int  #: claimed, not yet completed
    workers: int  #: live workers serving it
    slots_free: int  #: free slots of those workers
    #: no live worker serves it: its runs wait until one does (alert
    #: ShardschedQueueUnserved); a queue is known once a job names it
    unserved: bool


class Status(msgspec.Struct):
    now: datetime
    nodes: list[NodeView]
    workers: list[WorkerView]
    shards: list[ShardStatus]
    slots: int
    slots_free: int
    ready: int
    pending: int
    trigger_lag_p99_1m: float | None  #: worst node's p99 over the last minute (s)
    fired_1m: int
    missed: int
    overrunning: int
    dead_letter: int
    unowned: list[int]
    quarantined: int = 0
    stranded: int = 0  #: fired runs waiting for a worker for more than 5 min
    failed_1h: int = 0  #: runs that ended failed or dead_letter in the last hour
    #: what ``shardsched dev`` keeps alive, and how often each had to be started again
    supervised: list[Supervised] = msgspec.field(default_factory=list)
    queues: list[QueueStatus] = msgspec.field(default_factory=list)
    #: the durable mode as stored (docs/operations.md): replicas each write waits for (0:
    #: off) and for how long
    durable_replicas: int = 0
    durable_timeout_ms: int = 0


def queue_depths(dep: Deployment, now_ms: int, stranded_after_ms: int = STRANDED_AFTER_MS) -> Op:
    """Per shard: (ready, pending, overdue, dead-lettered, stats hash fields, stranded,
    failed in the last hour)."""
    calls = []
    for s in range(dep.n_shards):
        sk = dep.shard(s)
        calls += [
            Call(("XLEN", sk.ready)),
            Call(("XPENDING", sk.ready, CONSUMER_GROUP)),
            Call(("ZCOUNT", sk.timer, "-inf", now_ms - OVERDUE_MS)),
            Call(("ZCARD", sk.dead_letter)),
            Call(("HMGET", sk.stats, "missed", "lease_reclaims", "dag_stalled", "quarantined")),
            Call(("ZCOUNT", sk.failures, now_ms - 3_600_000, "+inf")),
        ]
    replies = yield calls
    groups = yield [Call(("XINFO", "GROUPS", dep.shard(s).ready)) for s in range(dep.n_shards)]
    # Not yet delivered to any worker and older than STRANDED_AFTER_MS: stranded.
    stranded_calls = []
    for s in range(dep.n_shards):
        last = _last_delivered(groups[s])
        stranded_calls.append(
            Call(
                (
                    "XRANGE",
                    dep.shard(s).ready,
                    f"({last}" if last != "0-0" else "-",
                    now_ms - stranded_after_ms,
                    "COUNT",
                    STRANDED_COUNT_CAP,
                )
            )
        )
    stranded = yield stranded_calls
    out = []
    for s in range(dep.n_shards):
        length, pending, overdue, dead, stats, failed = replies[6 * s : 6 * s + 6]
        # no consumer group yet (nothing ever claimed): an error reply, nothing pending
        n_pending = 0 if isinstance(pending, Exception) else int(pending[0])
        n_ready = max(int(length) - n_pending, 0)
        counters = tuple(int(v or 0) for v in check(stats))
        n_stranded = 0 if isinstance(stranded[s], Exception) else len(stranded[s])
        out.append((n_ready, n_pending, int(overdue), int(dead), counters, n_stranded, int(failed)))
    return out


def queue_statuses(dep: Deployment, shards: list[ShardStatus], workers: list[WorkerView]) -> Op:
    """Every queue a job of any shard named, and the default: its runs ready and running
    over all shards (the default's from ``shards``), and the live workers serving it."""
    sets = yield [Call(("SMEMBERS", dep.shard(s).queues)) for s in range(dep.n_shards)]
    streams = sorted(
        {(s, q.decode()) for s in range(dep.n_shards) for q in check(sets[s])},
        key=lambda sq: (sq[1], sq[0]),
    )
    replies = yield [
        Call((cmd, dep.shard(s).ready_of(q), *group))
        for s, q in streams
        for cmd, group in (("XLEN", ()), ("XPENDING", (CONSUMER_GROUP,)))
    ]
    depth = {DEFAULT_QUEUE: [sum(s.ready for s in shards), sum(s.pending for s in shards)]}
    for i, (_, stream) in enumerate(streams):
        length, pending = replies[2 * i : 2 * i + 2]
        n_pending = 0 if isinstance(pending, Exception) else int(pending[0])
        counts = depth.setdefault(parse_stored(stream)[0], [0, 0])  # all its bands
        counts[0] += max(int(check(length)) - n_pending, 0)
        counts[1] += n_pending
    out = []
    for queue in sorted(depth.keys() | {q for w in workers for q in w.queues}):
        serving = [w for w in workers if queue in w.queues and not w.draining]
        ready, running = depth.get(queue, (0, 0))
        out.append(
            QueueStatus(
                queue=queue,
                ready=ready,
                running=running,
                workers=len(serving),
                slots_free=sum(w.capacity_free for w in serving),
                unserved=not serving,
            )
        )
    return out


def _last_delivered(reply: object) -> str:
    """The consumer group's last-delivered id from XINFO GROUPS ('0-0' if none yet)."""
    if not isinstance(reply, list):
        return "0-0"
    for group in reply:
        fields = dict(zip(group[::2], group[1::2], strict=False))
        if fields.get(b"name") == CONSUMER_GROUP.encode():
            value = fields.get(b"last-delivered-id", b"0-0")
            return value.decode() if isinstance(value, bytes) else str(value)
    return "0-0"


def status_view(dep: Deployment, stranded_after_ms: int = STRANDED_AFTER_MS) -> Op:
    view = yield from cluster_view(dep)
    workers = yield from list_workers(dep)
    now_ms = int(view.now.timestamp() * 1000)
    depths = yield from queue_depths(dep, now_ms, stranded_after_ms)
    live = {n.node_id for n in view.nodes}
    shards = [
        ShardStatus(
            shard=s.shard,
            owner=s.owner,
            live=s.owner in live,
            epoch=s.epoch,
            ready=ready,
            pending=pending,
            overdue=overdue,
            dead_letter=dead,
            missed=missed,
            lease_reclaims=reclaims,
            dag_stalled=stalled,
            quarantined=quarantined,
            stranded=n_stranded,
            failed_1h=failed,
        )
        for s, (
            ready,
            pending,
            overdue,
            dead,
            (missed, reclaims, stalled, quarantined),
            n_stranded,
            failed,
        ) in zip(view.shards, depths, strict=True)
    ]
    queues = yield from queue_statuses(dep, shards, workers.workers)
    lags = [n.lag_p99_1m for n in view.nodes if n.lag_p99_1m is not None]
    children, durable_code = yield [
        Call(("HGETALL", dep.globals.supervised)),
        Call(("HGET", dep.globals.meta, "durable")),
    ]
    try:
        durable = Durability.parse(check(durable_code))
    except ValueError:  # not this version's writing (a hand edit): shown as off
        durable = None
    return Status(
        now=from_ms(now_ms),
        nodes=view.nodes,
        workers=workers.workers,
        shards=shards,
        slots=sum(w.capacity for w in workers.workers),
        slots_free=sum(w.capacity_free for w in workers.workers),
        ready=sum(q.ready for q in queues),
        pending=sum(q.running for q in queues),
        trigger_lag_p99_1m=max(lags) if lags else None,
        fired_1m=sum(n.fired_1m for n in view.nodes),
        missed=sum(s.missed for s in shards),
        overrunning=sum(w.overrunning for w in workers.workers),
        dead_letter=sum(s.dead_letter for s in shards),
        unowned=[s.shard for s in shards if not s.live],
        quarantined=sum(s.quarantined for s in shards),
        stranded=sum(s.stranded for s in shards),
        failed_1h=sum(s.failed_1h for s in shards),
        supervised=sorted((_supervised.decode(c) for c in check(children)[1::2]), key=_by_name),
        queues=queues,
        durable_replicas=durable.replicas if durable else 0,
        durable_timeout_ms=durable.timeout_ms if durable else 0,
    )


_supervised = msgspec.json.Decoder(Supervised)


def _by_name(child: Supervised) -> str:
    return child.name
