"""Wrappers of the scripts that put runs back: the owner's reclaim of lapsed leases, and an
operator's retry of a dead-lettered run."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, NamedTuple

from shardsched.core.errors import AlreadyRetried, ConflictError, RunNotFound
from shardsched.store.calls import Call
from shardsched.store.keys import CONSUMER_GROUP, ShardKeys, owner_id
from shardsched.store.lua import signature
from shardsched.store.lua.runs import Fenced
from shardsched.store.ready import woken

RECLAIM = signature(
    "reclaim",
    keys=("ready", "epoch", "stats", "reclaim_at", "timer"),
    argv=("epoch", "group", "base", "count", "poison limit"),
)


def reclaim(sk: ShardKeys, epoch: int, count: int, poison_limit: int) -> Call:
    """Send lapsed leases' runs back to scheduled, or fail them as poison and quarantine
    their job (fenced); decode with :func:`decode_reclaimed`."""
    return RECLAIM.call(
        (sk.ready, sk.epoch, sk.stats, sk.reclaim_at, sk.timer),
        (epoch, CONSUMER_GROUP, sk.base, count, poison_limit),
    )


class Reclaimed(NamedTuple):
    reclaimed: int  #: runs sent back to scheduled
    poisoned: int  #: runs failed after too many lapses in a row
    next_ms: int | None  #: when to look again (server clock); None: nothing ever claimed
    now_ms: int
    released: int  #: DAG tasks released by runs failed here
    queues: tuple[str, ...] = ("",)  #: the queues runs went to (store/ready.py)

    @property
    def requeued(self) -> bool:
        """Whether runs went back to the ready stream (the caller wakes a worker)."""
        return self.reclaimed > 0 or self.released > 0


def decode_reclaimed(reply: Sequence[Any]) -> Reclaimed | None:
    """The reply; None when the caller's epoch is stale."""
    if reply[0] == Fenced.STALE_EPOCH:
        return None
    at = reply[3]
    released = int(reply[5]) if len(reply) > 5 else 0
    queues = woken(reply[6]) if len(reply) > 6 else ("",)
    return Reclaimed(
        int(reply[1]), int(reply[2]), int(at) if at else None, int(reply[4]), released, queues
    )


class Retried(enum.IntEnum):
    """retry_run's first reply field."""

    RETRIED = 1
    ALREADY_RETRIED = 2  #: nothing written: a double click must not run the job twice
    NO_SUCH_RUN = -1
    NOT_DEAD_LETTERED = -2
    DAG_SETTLED = -3  #: a DAG task's run whose DAG run settled on this failure


def raise_retry_refusal(code: int, run_id: str, next_run_id: str | None) -> None:
    """Raise the project's exception for a refused retry; RETRIED returns."""
    if code == Retried.NO_SUCH_RUN:
        raise RunNotFound(run_id)
    if code == Retried.NOT_DEAD_LETTERED:
        raise ConflictError(f"run {run_id!r} is not dead-lettered")
    if code == Retried.DAG_SETTLED:
        dag = owner_id(run_id)  # a DAG task's run: its DAG
        raise ConflictError(
            f"run {run_id!r} is a DAG task's: its DAG run settled on this failure; "
            f"trigger the DAG again instead (shardsched dags trigger {dag})"
        )
    if code == Retried.ALREADY_RETRIED:
        raise AlreadyRetried(run_id, next_run_id or "")


RETRY_RUN = signature(
    "retry_run",
    keys=("ready", "deadletter"),
    argv=("base", "run id", "actor", "failed too"),
)


def retry_run(sk: ShardKeys, run_id: str, actor: str, failed_too: bool = False) -> Call:
    """A dead-lettered run (``failed_too``: or one that failed for good, as a gap-aware
    backfill asks) as a new attempt; reply {code, new run id, queues} (the caller wakes a
    worker of the queue when retried)."""
    flag = "1" if failed_too else ""
    return RETRY_RUN.call((sk.ready, sk.dead_letter), (sk.base, run_id, actor, flag))
