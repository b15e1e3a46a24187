"""Reading jobs for a list: the whole of each job of a page, and the filter of a job or DAG
list, which looks first at only what it needs (a light decode of each spec) so that a
selective filter over many jobs decodes the whole of just the jobs it keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from shardsched.core.labels import matches
from shardsched.core.models import JobStatus
from shardsched.core.queues import DEFAULT_QUEUE
from shardsched.core.views import Dag, Job
from shardsched.ops.jobs.read import job_calls, plain_job
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.records import job_record

Entries = list[tuple[float, bytes]]


def list_filter(
    status: JobStatus | None,
    name_prefix: str | None,
    within: tuple[str, ...] = (),
    include_deleted: bool = True,
    labels: dict[str, str] | None = None,
    queue: str | None = None,
) -> Callable[[Any], bool] | None:
    """The filter of a job or DAG list (both have ``status``, ``name`` and ``labels``);
    None: keep all. ``within``: the name prefixes of a team's token, which sees nothing
    else. Without a status, deleted ones are left out unless ``include_deleted``. With
    ``labels``, only those that have every one of them."""
    if (
        status is None
        and not name_prefix
        and not within
        and include_deleted
        and not labels
        and queue is None
    ):
        return None

    def keep(item: Job | Dag) -> bool:
        return (
            (
                item.status == status
                if status is not None
                else include_deleted or item.status != JobStatus.DELETED
            )
            and (not name_prefix or item.name.startswith(name_prefix))
            and (not within or item.name.startswith(within))
            and (not labels or matches(item.labels, labels))
            and (queue is None or getattr(item, "queue", None) == queue)
        )

    return keep


def read_jobs(dep: Deployment, entries: Entries) -> Op:
    """The jobs of index entries in one round trip (DAGs, listed apart, are left out)."""
    ids = [member.decode() for _, member in entries]
    calls = [c for job_id in ids for c in job_calls(dep, job_id)]
    replies = yield calls
    jobs: list[Job | None] = []
    for n, job_id in enumerate(ids):
        rec = None if k.is_dag_id(job_id) else job_record(check(replies[2 * n]))
        if rec is None or rec.dag_id is not None:
            jobs.append(None)
        else:
            jobs.append(plain_job(dep, job_id, rec, check(replies[2 * n + 1])))
    return jobs


class _Listed(msgspec.Struct):
    """What a job list's filter looks at, decoded from a stored spec without the rest."""

    name: str = ""
    labels: dict[str, str] = {}
    queue: str = DEFAULT_QUEUE
    status: str = ""


_listed = msgspec.json.Decoder(_Listed)


#: A job is late when its next fire is this far behind the server's clock: its shard's
#: owner fires due ticks within milliseconds, so none is, or it is stuck.
LATE_MS = 60_000
#: What a failing job's newest run ended as.
_FAILED = frozenset({b"failed", b"dead_letter"})


def read_kept_jobs(
    dep: Deployment,
    entries: Entries,
    keep: Callable[[Any], bool],
    health: str | None = None,
    now_ms: int = 0,
) -> Op:
    """The jobs of index entries that ``keep`` keeps (None for the others): each job's
    status and spec first (a light decode), then, with ``health``, whether it is
    ``failing`` (its newest run failed for good) or ``late`` (its next fire LATE_MS
    behind ``now_ms``), then the whole of the kept ones."""
    ids = [member.decode() for _, member in entries]
    replies = yield [Call(("HMGET", dep.keys_for(j).job(j), "status", "dag", "spec")) for j in ids]
    kept = []
    for i, (job_id, reply) in enumerate(zip(ids, replies, strict=True)):
        st, dag, spec = check(reply)
        if k.is_dag_id(job_id) or st is None or dag is not None or spec is None:
            continue
        light = _listed.decode(spec)
        light.status = st.decode()
        if keep(light):
            kept.append(i)
    if health == "late":
        scores = yield [Call(("ZSCORE", dep.keys_for(ids[i]).timer, ids[i])) for i in kept]
        kept = [
            i
            for i, sc in zip(kept, scores, strict=True)
            if check(sc) is not None and float(check(sc)) < now_ms - LATE_MS
        ]
    elif health == "failing":
        newest = yield [
            Call(("ZREVRANGE", dep.keys_for(ids[i]).runs_of(ids[i]), 0, 0)) for i in kept
        ]
        last = [(i, check(r)[0].decode()) for i, r in zip(kept, newest, strict=True) if check(r)]
        states = yield [Call(("HGET", dep.keys_for(rid).run(rid), "st")) for _, rid in last]
        kept = [i for (i, _), st in zip(last, states, strict=True) if check(st) in _FAILED]
    full = yield from read_jobs(dep, [entries[i] for i in kept])
    out: list[Job | None] = [None] * len(entries)
    for i, job in zip(kept, full, strict=True):
        out[i] = job
    return out
