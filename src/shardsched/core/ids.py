"""The grammar of ids: a job's, a DAG's and a DAG task's, a run's, a DAG run's.

A job id is ``job_<12 hex>`` (or one the user chose), a DAG's ``dag_<12 hex>``, a DAG
task's job id ``<dag_id>.<task>``; a run id is ``<job_id>:<tick>:<attempt>`` (the tick is
the scheduled ms, or ``m<ms>``/``t<n>`` for a run by hand) and a DAG run id
``<dag_id>:<tick>``. Deterministic run ids are the dedupe: creating one twice is a no-op.
Pure: the key layout (store/keys.py) and the worker both read ids through this module.
"""

from __future__ import annotations

import secrets
from typing import NamedTuple


def shard_key(any_id: str) -> str:
    """The part of a job, DAG or run id that decides its shard.

    A DAG task's job id is ``<dag_id>.<task>`` and a run id ``<job_id>:<tick>:<attempt>``;
    both hash by the part before the first ``.`` or ``:``, the way Redis hash tags work.
    """
    cut = len(any_id)
    for sep in (".", ":"):
        i = any_id.find(sep)
        if 0 < i < cut:
            cut = i
    return any_id[:cut]


def new_job_id() -> str:
    return "job_" + secrets.token_hex(6)


def new_job_ids(n: int) -> list[str]:
    """``n`` new job ids from one read of the system's randomness (a bulk registration:
    a read per id cost more than the rest of the id's planning)."""
    hexes = secrets.token_hex(6 * n)
    return ["job_" + hexes[i : i + 12] for i in range(0, 12 * n, 12)]


def new_dag_id() -> str:
    return "dag_" + secrets.token_hex(6)


def is_dag_id(any_id: str) -> bool:
    """A DAG's own id (not one of its tasks' job ids ``<dag_id>.<task>``)."""
    return any_id.startswith("dag_") and "." not in any_id and ":" not in any_id


def dag_id_of(handle: str) -> str:
    """A DAG's id as stored from the id a user gave: ``etl`` is ``dag_etl`` (the prefix is
    how a run id says it is a DAG's), ``dag_etl`` stays as it is."""
    return handle if handle.startswith("dag_") else "dag_" + handle


def dag_run_id_of(handle: str) -> str:
    """A DAG run id ``<dag_id>:<tick>`` with its DAG's id as stored (:func:`dag_id_of`)."""
    head, sep, rest = handle.partition(":")
    return dag_id_of(head) + sep + rest if sep and head else handle


def task_job_id(dag_id: str, task: str) -> str:
    return f"{dag_id}.{task}"


def parse_task_job_id(job_id: str) -> tuple[str, str] | None:
    """A DAG task's job id ``<dag_id>.<task>`` as (DAG id, task); None for any other id."""
    dag_id, dot, task = job_id.partition(".")
    return (dag_id, task) if dot and task and is_dag_id(dag_id) else None


def dag_run_of(rid: str) -> str | None:
    """The DAG run id ``<dag_id>:<tick>`` of a DAG task's run ``<dag_id>.<task>:<tick>:<n>``."""
    job, _, rest = rid.partition(":")
    dag_id, dot, _task = job.partition(".")
    return f"{dag_id}:{rest.rpartition(':')[0]}" if dot and is_dag_id(dag_id) else None


def run_id(job_id: str, scheduled_ms: int, attempt: int) -> str:
    """The deterministic id of a scheduled firing; creating it twice is the dedupe."""
    return f"{job_id}:{scheduled_ms}:{attempt}"


def job_of_run(rid: str) -> str:
    return rid.split(":", 1)[0]


class RunIdParts(NamedTuple):
    job_id: str
    tick: str  #: the scheduled ms, or a run by hand's ``m<ms>`` / ``t<n>``
    attempt: int


def parse_run_id(rid: str) -> RunIdParts:
    """A run id's parts; ValueError when it is not ``<job_id>:<tick>:<attempt>``."""
    parts = rid.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].isdigit():
        raise ValueError(f"not a run id: {rid!r}")
    return RunIdParts(parts[0], parts[1], int(parts[2]))


def plain_firing_of(rid: str) -> str | None:
    """The firing ``<job>:<tick>`` of a plain job's run id, cut without parsing (a traced
    worker asks it of every run it claims); None for anything else: a DAG task's run
    (its firing is its DAG run) or what is no run id. Agrees with :func:`parse_run_id`
    wherever it answers (tests/core/test_trace_ids.py)."""
    firing, _, attempt = rid.rpartition(":")
    head, _, tick = firing.rpartition(":")
    return firing if head and tick and attempt.isdigit() and "." not in head else None


def attempt_of(rid: str) -> int | None:
    """A run id's attempt; None for what is not a run id (a DAG run id, a job id)."""
    try:
        return parse_run_id(rid).attempt
    except ValueError:
        return None


def with_attempt(rid: str, attempt: int) -> str:
    """The id of the same firing's ``attempt``-th attempt (ValueError: not a run id)."""
    parts = parse_run_id(rid)
    return f"{parts.job_id}:{parts.tick}:{attempt}"


def firing_of(rid: str) -> str:
    """A run's firing ``<job>:<tick>``, which its attempts share; any other id (a DAG
    run's ``<dag_id>:<tick>``) is its own."""
    try:
        parts = parse_run_id(rid)
    except ValueError:
        return rid
    return f"{parts.job_id}:{parts.tick}"


def parse_dag_run_id(drid: str) -> tuple[str, str]:
    """A DAG run id's DAG id and tick (``<dag_id>:<tick>``; the tick as written)."""
    dag_id, _, tick = drid.partition(":")
    return dag_id, tick
