"""The record field maps: which hash field holds what, and the one decoder of each record.

Field letters are short because there are millions of run records; every reader goes
through the tuples and decoders here, never by letters of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TypeVar

import msgspec

from shardsched.core import trace_ids
from shardsched.core.access import TokenAct
from shardsched.core.ids import parse_run_id, task_job_id
from shardsched.core.instants import from_ms
from shardsched.core.models import DagRunState, RunState, TaskState
from shardsched.core.queues import DEFAULT_QUEUE, Priority, key_of, parse_stored
from shardsched.core.views import Change, DagRun, DagTaskRun, Run

#: A run record (``run:<id>`` hash), in the order :func:`run_from_fields` unpacks:
#: state, created, scheduled_for (manual runs), worker, lease expiry, began, finished,
#: exit code, reason, DAG run id, job version.
RUN_FIELDS = (
    "st", "c", "s", "w", "l", "b", "f", "x", "r", "d", "v", "nx", "args", "q", "cb", "pl", "dlm"
)  # fmt: skip
#: A job hash, in the order the job readers unpack: spec JSON, status, created, updated,
#: version, DAG id (a DAG's task), pause reason, paused at, paused until.
#: (inc: its incarnation when re-created after a delete, born: when that one began; nf:
#: why an active job has no next fire, lua/check_timers.lua; fc: its fires, with max_fires)
JOB_FIELDS = (
    "spec",
    "status",
    "created",
    "updated",
    "version",
    "dag",
    "pr",
    "pa",
    "pu",
    "inc",
    "born",
    "nf",
    "fc",
)
#: A DAG hash: kind, spec JSON, status, created, updated, version, active runs, stalled.
DAG_FIELDS = (
    "kind", "spec", "status", "created", "updated", "version", "nact", "stalled", "inc", "born"
)  # fmt: skip
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


def run_from_fields(rid: str, fields: list[bytes | None]) -> Run:
    """A run from its record (:data:`RUN_FIELDS`); job, tick and attempt come from its id
    ``<job>:<tick>:<n>`` (a manual run's tick ``t<n>`` is stored in the record's ``s``)."""
    st, c, s, w, lease, b, f, x, r, d, v, nx, args, q, cb, pl, dlm = fields[:17]
    job_id, tick, attempt = parse_run_id(rid)
    queue, priority = parse_stored(q.decode()) if q else (DEFAULT_QUEUE, Priority.NORMAL)
    assert st is not None and c is not None
    state = RunState(st.decode())
    return Run(
        trace_id=f"{trace_ids.trace_id(rid):032x}",
        run_id=rid,
        job_id=job_id,
        dag_run_id=opt_text(d),
        scheduled_for=from_ms(int(s or tick)),
        state=state,
        attempt=int(attempt),
        claimed_by=opt_text(w),
        lease_expires_at=opt_ms(lease) if state in _LEASED else None,
        created_at=from_ms(int(c)),
        started_at=opt_ms(b),
        finished_at=opt_ms(f),
        exit_code=None if not x else int(x),
        reason=opt_text(r),
        job_version=int(v) if v else None,
        next_run_id=opt_text(nx),
        args=None if args is None else msgspec.json.decode(args),
        queue=queue,
        priority=priority,
        concurrency_key=key_of(q.decode()) if q else None,
        cancelled_by=opt_text(cb),
        planned_for=opt_ms(pl),
        deadline_missed=opt_text(dlm),
    )


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
    dag_id = drid.split(":", 1)[0]
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
