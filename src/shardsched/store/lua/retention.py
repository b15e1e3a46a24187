"""The wrapper of the retention script the shard owner calls: remove archived history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from shardsched.store.calls import Call
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import signature
from shardsched.store.lua.runs import Fenced

EXPIRE_HISTORY = signature(
    "expire_history",
    keys=("epoch", "deadletter", "stats", "events"),
    argv=("epoch", "base", "events min id"),
    item=("kind", "id", "check"),
)


class Expiring(NamedTuple):
    """One item to remove, as it was archived."""

    kind: str  #: "r" a run, "d" a DAG run, "s" a skip record
    id: str  #: the run or DAG run id; a skip record's job id
    check: str  #: the finish time (ms) as archived, "" for none; the skip record itself

    @classmethod
    def run(cls, rid: str, finished_ms: int | None) -> Expiring:
        return cls("r", rid, "" if finished_ms is None else str(finished_ms))

    @classmethod
    def dag_run(cls, drid: str, finished_ms: int | None) -> Expiring:
        return cls("d", drid, "" if finished_ms is None else str(finished_ms))

    @classmethod
    def skip(cls, job_id: str, record: str) -> Expiring:
        return cls("s", job_id, record)


def expire_history(
    sk: ShardKeys, epoch: int, items: Sequence[Expiring], events_before_ms: int | None = None
) -> Call:
    """Remove archived items that are still as archived, and events older than
    ``events_before_ms`` (fenced); decode with :func:`decode_expired`."""
    flat: list[Any] = [field for item in items for field in item]
    trim = "" if events_before_ms is None else events_before_ms
    keys = (sk.epoch, sk.dead_letter, sk.stats, sk.events)
    return EXPIRE_HISTORY.call(keys, (epoch, sk.base, trim), flat)


class Expired(NamedTuple):
    removed: int  #: items taken out of Redis
    kept: int  #: items that changed since they were read, or became unremovable


def decode_expired(reply: Sequence[Any]) -> Expired | None:
    """The reply; None when the caller's epoch is stale."""
    if reply[0] == Fenced.STALE_EPOCH:
        return None
    return Expired(int(reply[1]), int(reply[2]))
