"""What became of a fired run, judged on its last attempt at the audit's instant: finished,
running under a lease, queued, retrying, waiting its key's turn, or stranded (fired and
not running anywhere past its deadline). Apart from :mod:`.ledger`, which says what
became of each *tick*; the audit asks both."""

from __future__ import annotations

import enum

from shardsched.core.ids import job_of_run
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment


class Execution(enum.StrEnum):
    """What became of a fired run, judged on its last attempt at the audit's instant."""

    TERMINAL = "terminal"  #: succeeded, failed for good, dead-lettered, skipped, cancelled
    RUNNING = "running"  #: claimed or running under a lease that has not lapsed
    QUEUED = "queued"  #: fired, waiting for a worker, not for long
    RETRYING = "retrying"  #: waiting for its next attempt's backoff
    #: over its concurrency key's limit, waiting its turn (core/concurrency.py): as long as
    #: the key's other runs take, so never stranded by age
    WAITING = "waiting"
    #: fired and not running anywhere past its deadline: waiting for a worker longer than
    #: ``stranded_after_s``, or claimed under a lease that lapsed and was not taken back
    STRANDED = "stranded"
    DAG = "dag"  #: a DAG run (its tasks' runs are accounted for as runs of their own)


#: A lapsed lease is taken back by the shard owner within a second or two; past this
#: grace a lapsed run is stranded.
LEASE_GRACE_MS = 10_000


def execution_of(fields: list[bytes | None], now_ms: int, stranded_after_ms: int) -> Execution:
    """Classify one run record (fields st, l, c, due) at ``now_ms``."""
    state, lease, created, due = ("" if v is None else v.decode() for v in fields)
    if state in ("succeeded", "failed", "dead_letter", "skipped", "cancelled"):
        return Execution.TERMINAL
    if state in ("claimed", "running"):
        lapsed = bool(lease) and int(lease) < now_ms - LEASE_GRACE_MS
        return Execution.STRANDED if lapsed else Execution.RUNNING
    if state == "waiting":
        return Execution.WAITING
    if state == "retrying":
        late = bool(due) and int(due) < now_ms - stranded_after_ms
        return Execution.STRANDED if late else Execution.RETRYING
    if state == "scheduled":
        old = bool(created) and int(created) < now_ms - stranded_after_ms
        return Execution.STRANDED if old else Execution.QUEUED
    return Execution.STRANDED  # a fired tick whose record is gone: not running anywhere


def executions(
    dep: Deployment,
    rids: list[str],
    now_ms: int,
    stranded_after_ms: int,
    archived: dict[str, tuple[str, str | None]] | None = None,
) -> Op:
    """Classify the fired runs ``rids`` by their last attempt; returns {rid: Execution}.
    Follows each run's next attempt (``nx``) in one round trip per attempt level."""
    out: dict[str, Execution] = {}
    current = {rid: rid for rid in rids if not k.is_dag_id(job_of_run(rid))}
    for rid in rids:
        if rid not in current:
            out[rid] = Execution.DAG
    for _level in range(101):  # attempts are capped at 100
        if not current:
            break
        items = list(current.items())
        replies = yield [
            Call(("HMGET", dep.keys_for(at).run(at), "st", "l", "c", "due", "nx"))
            for _, at in items
        ]
        following: dict[str, str] = {}
        for (first, at), fields in zip(items, replies, strict=True):
            fields = check(fields)
            if fields[0] is None and archived and at in archived:  # left for the archive
                state, nx = archived[at]
                if nx is not None and state in ("failed", "dead_letter"):
                    following[first] = nx
                else:
                    out[first] = Execution.TERMINAL  # only finished runs are archived
            elif fields[4] is not None and fields[0] in (b"failed", b"dead_letter"):
                following[first] = fields[4].decode()  # sent back as a new attempt
            else:
                out[first] = execution_of(fields[:4], now_ms, stranded_after_ms)
        current = following
    return out
