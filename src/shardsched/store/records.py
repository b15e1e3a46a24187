"""The records as stored: which hash field holds what, and the one decoder of each.

Field letters are short because there are millions of run records. A run, a job and a
DAG hash decode by name into a typed record here (:class:`RunRecord`, :class:`JobRecord`,
:class:`DagRecord`, from an HMGET of ``*_FIELDS``); nothing outside store/ unpacks one by
position, and a reader that wants two or three fields names them at its HMGET.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TypeVar

import msgspec

from shardsched.core import trace_ids
from shardsched.core.access import TokenAct
from shardsched.core.ids import parse_dag_run_id, parse_run_id, task_job_id
from shardsched.core.instants import from_ms
from shardsched.core.models import DagRunState, RunState, TaskState
from shardsched.core.queues import DEFAULT_QUEUE, Priority, key_of, parse_stored
from shardsched.core.views import Change, DagRun, DagTaskRun, Run

#: A run record's fields and the letters they are stored under (millions of records).
_RUN_LETTERS = {
    "state": "st", "created_ms": "c", "scheduled_ms": "s", "worker": "w", "lease_ms": "l",
    "began_ms": "b", "finished_ms": "f", "exit_code": "x", "reason": "r", "dag_run_id": "d",
    "job_version": "v", "next_run_id": "nx", "args": "args", "queue": "q",
    "cancelled_by": "cb", "planned_ms": "pl", "deadline_missed": "dlm", "stalled_ms": "stl",
    "backfill": "bf", "cause": "cause", "coalesced": "co",
    "coalesced_count": "con",
}  # fmt: skip


class RunRecord(msgspec.Struct, frozen=True, rename=_RUN_LETTERS):
    """A run record (``run:<id>`` hash) by name; its letters are ``_RUN_LETTERS``. Job,
    tick and attempt are in the run id (``core/ids``), so the record keeps only the rest;
    an absent field and an empty one both read as None."""

    state: str
    created_ms: int
    scheduled_ms: int | None = None  #: a manual run's tick (its id says ``t<n>``)
    worker: str | None = None  #: who claimed it
    lease_ms: int | None = None  #: its lease's expiry (means something claimed or running)
    began_ms: int | None = None
    finished_ms: int | None = None
    exit_code: int | None = None
    reason: str | None = None
    dag_run_id: str | None = None
    job_version: int | None = None
    next_run_id: str | None = None  #: the same firing's next attempt
    args: str | None = None  #: JSON: a run by hand's args
    queue: str | None = None  #: as stored (core/queues.py): queue, band and concurrency key
    cancelled_by: str | None = None
    planned_ms: int | None = None  #: a spread job's planned time (core/jitter.py)
    deadline_missed: str | None = None
    stalled_ms: int | None = None  #: a DAG task's run released, unclaimed past its SLA
    backfill: str | None = None  #: made by a backfill (its id)
    cause: str | None = None  #: made by an event or an upstream's outcome (core/events.py)
    coalesced: str | None = None  #: ticks (ms, comma-joined) it stands for (backlog coalesce)
    coalesced_count: int | None = None  #: how many (the list keeps about the first 1,000)


#: The hash fields of a run record, in the order an HMGET of them answers.
RUN_FIELDS = tuple(_RUN_LETTERS.values())


def run_record(fields: Sequence[bytes | None]) -> RunRecord | None:
    """A run record from ``HMGET run:<id> *RUN_FIELDS``'s reply; None: there is none."""
    if fields[0] is None:
        return None
    values = {letter: v.decode() for letter, v in zip(RUN_FIELDS, fields, strict=True) if v}
    return msgspec.convert(values, RunRecord, strict=False)


#: A job hash's fields and the letters they are stored under.
_JOB_LETTERS = {
    "spec": "spec", "status": "status", "created_ms": "created", "updated_ms": "updated",
    "version": "version", "dag_id": "dag", "pause_reason": "pr", "paused_ms": "pa",
    "paused_until_ms": "pu", "incarnation": "inc", "incarnation_ms": "born",
    "no_next_fire": "nf", "fires": "fc",
}  # fmt: skip


class JobRecord(msgspec.Struct, frozen=True, rename=_JOB_LETTERS):
    """A job hash by name (a job's, or a DAG task's: ``dag_id`` set); its letters are
    ``_JOB_LETTERS``. The spec stays JSON: a task's and a job's decode differently."""

    spec: str
    status: str
    created_ms: int
    updated_ms: int
    version: int
    dag_id: str | None = None  #: a DAG's task: the DAG
    pause_reason: str | None = None
    paused_ms: int | None = None
    paused_until_ms: int | None = None
    incarnation: int | None = None  #: re-created after a delete: which time
    incarnation_ms: int | None = None  #: when this incarnation began
    no_next_fire: str | None = None  #: why an active job has no timer entry (check_timers.lua)
    fires: int | None = None  #: its fires so far, with max_fires


#: The hash fields of a job, in the order an HMGET of them answers.
JOB_FIELDS = tuple(_JOB_LETTERS.values())


def job_record(fields: Sequence[bytes | None]) -> JobRecord | None:
    """A job record from ``HMGET job:<id> *JOB_FIELDS``'s reply; None: there is none (a
    DAG's hash, whose fields differ, is the caller's to tell apart by its id)."""
    if fields[0] is None:
        return None
    values = {letter: v.decode() for letter, v in zip(JOB_FIELDS, fields, strict=True) if v}
    return msgspec.convert(values, JobRecord, strict=False)


#: A DAG hash's fields and the letters they are stored under.
_DAG_LETTERS = {
    "kind": "kind", "spec": "spec", "status": "status", "created_ms": "created",
    "updated_ms": "updated", "version": "version", "active": "nact", "stalled": "stalled",
    "incarnation": "inc", "incarnation_ms": "born",
}  # fmt: skip


class DagRecord(msgspec.Struct, frozen=True, rename=_DAG_LETTERS):
    """A DAG's hash by name (``kind`` is ``dag``); its letters are ``_DAG_LETTERS``."""

    kind: str
    spec: str
    status: str
    created_ms: int
    updated_ms: int
    version: int
    active: int = 0  #: DAG runs open, as counted here (lua/lib/counters.lua has the rest)
    stalled: int = 0  #: tasks released and not claimed within their SLA
    incarnation: int | None = None
    incarnation_ms: int | None = None


#: The hash fields of a DAG, in the order an HMGET of them answers.
DAG_FIELDS = tuple(_DAG_LETTERS.values())


def dag_record(fields: Sequence[bytes | None]) -> DagRecord | None:
    """A DAG record from ``HMGET job:<dag> *DAG_FIELDS``'s reply; None: no DAG there."""
    if fields[0] != b"dag":
        return None
    values = {letter: v.decode() for letter, v in zip(DAG_FIELDS, fields, strict=True) if v}
    return msgspec.convert(values, DagRecord, strict=False)


#: The most output kept per run; the worker caps what it sends, the script what it stores.
OUTPUT_LIMIT = 64 * 1024


def opt_text(value: bytes | None) -> str | None:
    """A stored string; absent and empty both read as None."""
    return None if value is None or value == b"" else value.decode()


def opt_ms(value: bytes | None) -> datetime | None:
    """A stored instant (ms); absent and empty both read as None."""
    return None if value is None or value == b"" else from_ms(int(value))


#: The states in which a run's lease means something.
_LEASED = frozenset({RunState.CLAIMED, RunState.RUNNING})


def run_view(rid: str, rec: RunRecord) -> Run:
    """A run as the surfaces show it, from its record; job, tick and attempt come from its
    id ``<job>:<tick>:<n>`` (a manual run's tick ``t<n>`` is in the record)."""
    job_id, tick, attempt = parse_run_id(rid)
    q = rec.queue
    queue, priority = parse_stored(q) if q else (DEFAULT_QUEUE, Priority.NORMAL)
    state = RunState(rec.state)
    return Run(
        trace_id=f"{trace_ids.trace_id(rid):032x}",
        run_id=rid,
        job_id=job_id,
        dag_run_id=rec.dag_run_id,
        scheduled_for=from_ms(rec.scheduled_ms or int(tick)),
        state=state,
        attempt=int(attempt),
        claimed_by=rec.worker,
        lease_expires_at=opt_from_ms(rec.lease_ms) if state in _LEASED else None,
        created_at=from_ms(rec.created_ms),
        started_at=opt_from_ms(rec.began_ms),
        finished_at=opt_from_ms(rec.finished_ms),
        exit_code=rec.exit_code,
        reason=rec.reason,
        job_version=rec.job_version,
        next_run_id=rec.next_run_id,
        args=None if rec.args is None else msgspec.json.decode(rec.args),
        queue=queue,
        priority=priority,
        concurrency_key=key_of(q) if q else None,
        cancelled_by=rec.cancelled_by,
        planned_for=opt_from_ms(rec.planned_ms),
        deadline_missed=rec.deadline_missed,
        cause=rec.cause,
        stands_for=None
        if rec.coalesced is None
        else [from_ms(int(t)) for t in rec.coalesced.split(",")],
        stands_for_count=rec.coalesced_count,
    )


def opt_from_ms(ms: int | None) -> datetime | None:
    """An instant held in milliseconds, if there is one."""
    return None if ms is None else from_ms(ms)


class WorkerInfo(msgspec.Struct):
    """What a worker publishes in the registry (GET /api/v1/workers)."""

    capacity: int = 0
    capacity_free: int = 0
    running: int = 0
    completed: int = 0
    draining: bool = False
    started_ms: int = 0
    overrunning: int = 0
    queues: list[str] = msgspec.field(default_factory=lambda: ["default"])  #: it serves


class Supervised(msgspec.Struct):
    """A child ``shardsched dev`` keeps alive, as ``status`` shows it (global
    ``supervised`` hash, one field per child, written by dev when its state changes)."""

    name: str  #: dev-node, dev-worker-1, redis-server
    kind: str  #: node, worker, redis
    state: str  #: running, or restarting (died, waiting out its backoff)
    pid: int | None = None
    restarts: int = 0
    last_exit: str | None = None  #: how it last ended: "exit 1", "signal SIGKILL", an error
    since_ms: int = 0  #: when it entered this state (the dev process's clock)


class NodeInfo(msgspec.Struct):
    """What a node publishes about itself in the registry."""

    http: str | None = None
    started_ms: int = 0
    shards: list[int] = msgspec.field(default_factory=list)
    lag_p99_1m: float | None = None  #: trigger lag p99 of its firings in the last minute (s)
    fired_1m: int = 0
    lag_p50_1m: float | None = None  #: and their median (s)


#: A DAG run's per-task letter ('t:<task>'): waiting, succeeded, skipped, skipped as
#: upstream_failed; anything else (released, failed) reads from the task's run.
_TASK_CODE = {
    b"w": TaskState.WAITING,
    b"s": TaskState.SUCCEEDED,
    b"k": TaskState.SKIPPED,
    b"u": TaskState.SKIPPED,
}


def dag_run_from(drid: str, raw: list[bytes], tasks: list[str]) -> DagRun:
    """A DAG run from its hash (``dagrun:<id>``, HGETALL's flat list; lua/lib/dag.lua
    says what each field holds), its tasks in the DAG's order (``tasks``)."""
    fields = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
    dag_id = parse_dag_run_id(drid)[0]
    task_runs = []
    # the DAG's tasks in order, then any this run has that a later version removed
    ours = [key[2:].decode() for key in fields if key.startswith(b"t:")]
    for task in [*tasks, *sorted(set(ours) - set(tasks))]:
        code = fields.get(b"t:" + task.encode())
        if code is None:  # added to the DAG after this run opened
            continue
        task_runs.append(
            DagTaskRun(
                task=task,
                job_id=task_job_id(dag_id, task),
                state=_TASK_CODE.get(code, TaskState.SCHEDULED),
                run_id=opt_text(fields.get(b"r:" + task.encode())),
                released_at=opt_ms(fields.get(b"a:" + task.encode())),
            )
        )
    return DagRun(
        dag_run_id=drid,
        dag_id=dag_id,
        scheduled_for=from_ms(int(fields[b"s"])),
        state=DagRunState(fields[b"st"].decode()),
        manual=fields.get(b"m") == b"1",
        created_at=from_ms(int(fields[b"c"])),
        started_at=opt_ms(fields.get(b"b")),
        finished_at=opt_ms(fields.get(b"f")),
        reason=opt_text(fields.get(b"rs")),
        tasks=task_runs,
        cause=opt_text(fields.get(b"cause")),
    )


def change_from_entry(entry_id: bytes, fields: list[bytes]) -> Change:
    """One entry of a change log (``chg:<id>`` or ``acts:<id>``, lua/lib/changes.lua): its
    action, who, the version it made and a detail; the time is the entry's id."""
    f = dict(zip(fields[::2], fields[1::2], strict=True))
    version = f.get(b"v")
    return Change(
        at=from_ms(int(entry_id.split(b"-")[0])),
        action=f[b"a"].decode(),
        by=opt_text(f.get(b"by")),
        version=int(version) if version else None,
        detail=opt_text(f.get(b"x")),
    )


def token_act_from_entry(entry_id: bytes, fields: list[bytes]) -> TokenAct:
    """One entry of the token log (lua/lib/tokenlog.lua): who made or revoked which token."""
    f = dict(zip(fields[::2], fields[1::2], strict=True))
    return TokenAct(
        at=from_ms(int(entry_id.split(b"-")[0])),
        action=f[b"a"].decode(),
        by=f[b"by"].decode(),
        name=f[b"n"].decode(),
        detail=f.get(b"x", b"").decode() or None,
    )


T = TypeVar("T")


def decoded_entries(raw: list[bytes], decoder: msgspec.json.Decoder[T]) -> Iterator[tuple[str, T]]:
    """A hash's (field, value) pairs from HGETALL's flat reply whose value decodes; one
    written by a later version (a shape this one cannot read) is passed over."""
    for i in range(0, len(raw), 2):
        try:
            yield raw[i].decode(), decoder.decode(raw[i + 1])
        except msgspec.DecodeError:
            continue


def parse_version(kept: bytes) -> tuple[bytes, int, bytes | None, bytes]:
    """A vers:<job> entry: (status, from ms, by, spec JSON). Entries from before 'by' was
    recorded read "status|from|spec", and a spec is JSON (it opens with a brace)."""
    status, _, rest = kept.partition(b"|")
    since, _, rest = rest.partition(b"|")
    by: bytes | None = None
    if not rest.startswith(b"{"):
        by, _, rest = rest.partition(b"|")
    return status, int(since), by or None, rest
