"""The trace of a firing, named by its run id alone.

Every process derives the same ids from a run id, with no lookup and nothing stored: the
run id, the ledger's key, carries the trace from the node that fires a tick to each
worker that runs an attempt of it. One trace per firing (a tick of a job; a DAG run for
every task of it), so a repeating job is many short traces, never one endless one.

- the firing (the root span): its id from the tick (or the DAG run), ended when the tick's
  run (or the DAG run) ends for good
- a DAG task's tick (``<dag>.<task>:<tick>``): a child of its DAG run's firing
- an attempt (a run id ``<job>:<tick>:<n>``): a child of the firing (a DAG task's: of its
  task's span), linked to attempt n-1
- a delivery of an attempt (claim, execution, renewals): a child of its attempt, named by
  the delivery token too, so a run delivered again after a lost lease never reuses an id

Pure: hashing only (BLAKE2b, each id under its own personalisation).
"""

from __future__ import annotations

import hashlib

from shardsched.core.ids import dag_run_of, parse_run_id, plain_firing_of

#: a hasher per (kind, size), personalised once: a copy of one costs 40 % less than a new
#: one (the ids are asked of every run a traced worker claims and the owner fires)
_HASHERS: dict[tuple[bytes, int], hashlib.blake2b] = {}


def _id(kind: bytes, key: str, size: int) -> int:
    hasher = _HASHERS.get((kind, size))
    if hasher is None:
        hasher = _HASHERS[kind, size] = hashlib.blake2b(digest_size=size, person=kind)
    h = hasher.copy()
    h.update(key.encode())
    return int.from_bytes(h.digest(), "big") or 1  # an all-zero id is invalid in W3C


def firing_of(run_id: str) -> str:
    """What the trace is of: the DAG run of a DAG task's run, else ``<job>:<tick>``."""
    if drid := dag_run_of(run_id):
        return drid
    parts = parse_run_id(run_id)
    return f"{parts.job_id}:{parts.tick}"


def trace_id(run_id: str) -> int:
    """The 128-bit trace id of the firing a run belongs to (a worker asks it of every run
    it claims: a plain job's run id is cut here, anything else goes through
    :func:`firing_of`; tests/core/test_trace_ids.py holds the two alike)."""
    if (firing := plain_firing_of(run_id)) is not None:
        return _id(b"sstrace", firing, 16)
    return firing_trace_id(firing_of(run_id))


def firing_span_id(run_id: str) -> int:
    """The root span's id: the firing (a tick, or a DAG run) the run belongs to."""
    return firing_root_id(firing_of(run_id))


def firing_trace_id(firing: str) -> int:
    """The trace id of a firing named as :func:`firing_of` names it (``<job>:<tick>``, or
    a DAG run's id): what the node knows as it fires a tick."""
    return _id(b"sstrace", firing, 16)


def firing_root_id(firing: str) -> int:
    """The root span's id of a firing named as :func:`firing_of` names it."""
    return _id(b"ssfiring", firing, 8)


def task_span_id(run_id: str) -> int:
    """The span of a DAG task's tick (every attempt of it), child of its DAG run's root."""
    parts = parse_run_id(run_id)
    return _id(b"sstask", f"{parts.job_id}:{parts.tick}", 8)


def attempt_parent_id(run_id: str) -> int:
    """An attempt's parent: its task's span in a DAG run, else its firing's root."""
    return task_span_id(run_id) if dag_run_of(run_id) else firing_span_id(run_id)


def attempt_span_id(run_id: str) -> int:
    """The span of one attempt (a run id), child of the firing."""
    return _id(b"ssattempt", run_id, 8)


def delivery_span_id(run_id: str, token: int) -> int:
    """The execution span of one delivery of an attempt (its delivery token)."""
    return _id(b"ssexec", f"{run_id}#{token}", 8)


def previous_attempt(run_id: str) -> str | None:
    """Attempt n-1's run id (None for the first attempt)."""
    parts = parse_run_id(run_id)
    if parts.attempt <= 1:
        return None
    return f"{parts.job_id}:{parts.tick}:{parts.attempt - 1}"


def traceparent(trace: int, span: int, sampled: bool) -> str:
    """The W3C ``traceparent`` of a span (what a job finds in ``TRACEPARENT``)."""
    return f"00-{trace:032x}-{span:016x}-{'01' if sampled else '00'}"
