"""Wrappers of an operator's control over runs: cancel one run (``lua/cancel_run.lua``) or
a whole DAG run (``lua/cancel_dag_run.lua``), and repair a DAG run: clear or mark its
tasks (``lua/repair_dag_run.lua``)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, NamedTuple

from shardsched.core.errors import AlreadyRetried, ConflictError, DagRunNotFound, RunNotFound
from shardsched.store.calls import Call
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import signature
from shardsched.store.ready import woken

_KEYS = ("ready", "retries", "waiting", "dagwait")
CANCEL_RUN = signature("cancel_run", keys=_KEYS, argv=("base", "run id", "actor", "why"))
CANCEL_DAG_RUN = signature(
    "cancel_dag_run", keys=_KEYS, argv=("base", "dag run id", "actor", "why")
)


class Cancel(enum.IntEnum):
    """Both scripts' first reply field."""

    CANCELLED = 1
    NOT_FOUND = -1
    ENDED = -2  #: it had ended already; nothing written


class CancelledRun(NamedTuple):
    run_id: str  #: the attempt cancelled (a failed attempt's id names its tick's latest)
    was: str  #: the state it was in
    stored_queue: str  #: its queue as stored ('' the default; a keyed one names its key)


class CancelledDagRun(NamedTuple):
    was: str
    queues: tuple[str, ...]  #: queues that got runs (a queued DAG run started)
    tasks: tuple[CancelledRun, ...]  #: its task runs cancelled


def _keys(sk: ShardKeys) -> tuple[str, ...]:
    return (sk.ready, sk.retries, sk.waiting, sk.dag_wait)


def cancel_run(sk: ShardKeys, run_id: str, actor: str, why: str) -> Call:
    """Cancel a run (its tick's latest attempt); decode with :func:`decode_cancelled`."""
    return CANCEL_RUN.call(_keys(sk), (sk.base, run_id, actor, why))


def cancel_dag_run(sk: ShardKeys, dag_run_id: str, actor: str, why: str) -> Call:
    """Cancel a DAG run and its task runs; decode with :func:`decode_dag_cancelled`."""
    return CANCEL_DAG_RUN.call(_keys(sk), (sk.base, dag_run_id, actor, why))


def _queues(reply: Any) -> tuple[str, ...]:
    """0: no queue got runs; else as :func:`store.ready.woken` reads it."""
    return () if reply == 0 else woken(reply)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decode_cancelled(reply: Sequence[Any], run_id: str) -> tuple[CancelledRun, tuple[str, ...]]:
    """The run cancelled and the queues that got runs; raises the project's error when
    there was no such run or it had ended."""
    code = int(reply[0])
    if code == Cancel.NOT_FOUND:
        raise RunNotFound(run_id)
    if code == Cancel.ENDED:
        raise ConflictError(
            f"run {_text(reply[1])!r} has ended ({_text(reply[2])}): nothing to cancel"
        )
    run = CancelledRun(_text(reply[1]), _text(reply[2]), _text(reply[3]))
    return run, _queues(reply[4])


def decode_dag_cancelled(reply: Sequence[Any], dag_run_id: str) -> CancelledDagRun:
    code = int(reply[0])
    if code == Cancel.NOT_FOUND:
        raise DagRunNotFound(dag_run_id)
    if code == Cancel.ENDED:
        raise ConflictError(
            f"DAG run {dag_run_id!r} has ended ({_text(reply[1])}): nothing to cancel"
        )
    items = reply[3:]
    tasks = tuple(
        CancelledRun(_text(items[i]), _text(items[i + 1]), _text(items[i + 2]))
        for i in range(0, len(items), 3)
    )
    return CancelledDagRun(_text(reply[1]), _queues(reply[2]), tasks)


REPAIR_DAG_RUN = signature(
    "repair_dag_run",
    keys=("ready", "deadletter"),
    argv=(
        "base",
        "dag run id",
        "fingerprint",
        "actor",
        "note",
        "dead-lettered run",
        "task marked",
        "outcome",
        "tasks read",
    ),
    item=("*",),
)


class Repair(enum.IntEnum):
    """lua/repair_dag_run.lua's first reply field."""

    APPLIED = 1
    RETRIED_ALREADY = 2  #: the dead-lettered run named was retried already
    NOT_FOUND = -1
    NOT_REPAIRABLE = -2  #: queued, cancelled or skipped
    MOVED = -3  #: the DAG run is not as the plan read it


class Repaired(NamedTuple):
    queues: tuple[str, ...]  #: queues that got runs
    new_runs: tuple[str, ...]  #: the attempts it made


def repair_dag_run(
    sk: ShardKeys,
    dag_run_id: str,
    fingerprint: str,
    actor: str,
    note: str,
    names: Sequence[str],
    tasks_read: int,
    dead_lettered: str = "",
    marked: str = "",
    outcome: str = "",
) -> Call:
    """Apply a repair plan (core/dag_repair.py); decode with :func:`decode_repaired`."""
    args = (sk.base, dag_run_id, fingerprint, actor, note, dead_lettered, marked, outcome,
            tasks_read)  # fmt: skip
    return REPAIR_DAG_RUN.call((sk.ready, sk.dead_letter), args, names)


def decode_repaired(reply: Sequence[Any], dag_run_id: str, run_id: str = "") -> Repaired:
    """What the repair made; raises the project's error when it was refused."""
    code = int(reply[0])
    if code == Repair.NOT_FOUND:
        raise DagRunNotFound(dag_run_id)
    if code == Repair.RETRIED_ALREADY:
        raise AlreadyRetried(run_id, _text(reply[1]))
    if code == Repair.NOT_REPAIRABLE:
        raise ConflictError(
            f"DAG run {dag_run_id!r} is {_text(reply[1])}: only a running or ended one is "
            "repaired (trigger the DAG again instead)"
        )
    if code == Repair.MOVED:
        raise ConflictError(
            f"DAG run {dag_run_id!r} is not as the plan read it (a task ended, or a repair "
            "was applied first): nothing was done; make a new plan"
        )
    return Repaired(_queues(reply[1]), tuple(_text(r) for r in reply[2:]))
