"""The record field maps: which hash field holds what, and the one decoder of each record.

Field letters are short because there are millions of run records; every reader goes
through the tuples and decoders here, never by letters of its own.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from shardsched.core.ids import parse_run_id
from shardsched.core.instants import from_ms
from shardsched.core.models import RunState
from shardsched.core.views import Run

#: A run record (``run:<id>`` hash), in the order :func:`run_from_fields` unpacks:
#: state, created, scheduled_for (manual runs), worker, lease expiry, began, finished,
#: exit code, reason, DAG run id, job version.
RUN_FIELDS = ("st", "c", "s", "w", "l", "b", "f", "x", "r", "d", "v", "nx")
#: A job hash, in the order the job readers unpack: spec JSON, status, created, updated,
#: version, DAG id (a DAG's task), pause reason, paused at, paused until.
JOB_FIELDS = ("spec", "status", "created", "updated", "version", "dag", "pr", "pa", "pu")
#: A DAG hash: kind, spec JSON, status, created, updated, version, active runs, stalled.
DAG_FIELDS = ("kind", "spec", "status", "created", "updated", "version", "nact", "stalled")
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
    st, c, s, w, lease, b, f, x, r, d, v, nx = fields
    job_id, tick, attempt = parse_run_id(rid)
    assert st is not None and c is not None
    state = RunState(st.decode())
    return Run(
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
