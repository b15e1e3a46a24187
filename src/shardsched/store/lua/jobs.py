"""Wrappers of the job scripts: register, change, delete, trigger, backfill, quarantine."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from shardsched.core.errors import DagDeleted, DagNotFound, JobDeleted, JobNotFound
from shardsched.store.calls import Call
from shardsched.store.keys import GlobalKeys, ShardKeys, names_bucket
from shardsched.store.lua import signature


class JobReply(enum.IntEnum):
    """The first field of update_job, delete_job, trigger and backfill replies."""

    OK = 1
    NO_SUCH_JOB = -1
    DELETED = -2
    VERSION_MOVED = -3  #: update_job: the job changed since the caller read it
    REPEATED = 2  #: trigger: its idempotency key was used: the first trigger's run answers


def raise_refusal(code: int, job_id: str, *, dag: bool = False) -> None:
    """Raise the project's exception for a refusal (NO_SUCH_JOB, DELETED) of a job's (or,
    with ``dag``, a DAG's) script; any other code returns."""
    if code == JobReply.NO_SUCH_JOB:
        raise DagNotFound(job_id) if dag else JobNotFound(job_id)
    if code == JobReply.DELETED:
        raise DagDeleted(job_id) if dag else JobDeleted(job_id)


class NewJob(msgspec.Struct, frozen=True, gc=False):
    """One job for register_job. Never tracked by the garbage collector (it holds no
    container): a bulk registration makes one a job."""

    job_id: str
    spec_json: bytes
    timing_json: bytes
    first_ms: int | None  #: None: the job never fires
    lease_ms: int
    auto_pause_after: int | None = None  #: the policy, stored as a field the script reads
    queue: str = ""  #: as stored (core/queues.py): '' for the default
    name: str = ""  #: for the shard's index of names (lua/lib/names.lua)
    deadman_ms: int | None = None  #: its dead-man's switch (lua/deadlines.lua)


REGISTER_JOB = signature(
    "register_job",
    keys=("timer", "jobs"),
    argv=("base", "wake channel", "shard", "actor"),
    item=(
        "job id",
        "spec",
        "timing",
        "first fire",
        "lease",
        "auto pause after",
        "queue",
        "name",
        "dead man",
        "name bucket",
    ),
)


def register_job(sk: ShardKeys, g: GlobalKeys, jobs: Iterable[NewJob], actor: str) -> Call:
    """Register jobs of one shard; decode with :func:`decode_registered`."""
    items: list[Any] = []
    for j in jobs:
        items += (
            j.job_id,
            j.spec_json,
            j.timing_json,
            "" if j.first_ms is None else j.first_ms,
            j.lease_ms,
            "" if j.auto_pause_after is None else j.auto_pause_after,
            j.queue,
            j.name,
            "" if j.deadman_ms is None else j.deadman_ms,
            names_bucket(j.name) if j.name else "",
        )
    return REGISTER_JOB.call((sk.timer, sk.jobs), (sk.base, g.wake_channel, sk.shard, actor), items)


class Registered(enum.IntEnum):
    """register_job's answer for one job."""

    NEW = 1
    RECREATED = 2  #: the id was a deleted job's: its new incarnation
    TAKEN = -1


def decode_registered(reply: Sequence[Any]) -> list[Registered]:
    """Per job, in the order sent: what became of it."""
    return [_REGISTERED[code] for code in reply[1:]]


_REGISTERED = {int(r): r for r in Registered}  #: by the script's integer reply


UPDATE_JOB = signature(
    "update_job",
    keys=("job", "timer", "segs", "versions", "resumes", "changes"),
    argv=(
        "job id",
        "version",
        "spec",
        "timing",
        "status",
        "next fire",
        "lease",
        "wake channel",
        "shard",
        "roll",
        "pause reason",
        "paused until",
        "auto pause after",
        "actor",
        "change",
        "detail",
        "queue",
        "old name",
        "new name",
        "revive",
        "dead man",
    ),
)


def update_job(
    sk: ShardKeys,
    g: GlobalKeys,
    job_id: str,
    *,
    version: int,
    spec_json: bytes,
    timing_json: bytes,
    status: str,
    next_fire: int | str,
    lease_ms: int,
    roll: bool,
    pause_reason: str = "",
    paused_until_ms: int | None = None,
    auto_pause_after: int | None = None,
    actor: str,
    change: str,
    detail: str = "",
    queue: str | None = None,
    rename: tuple[str, str] = ("", ""),
    revive: bool = False,
    deadman_ms: int | str | None = "=",
) -> Call:
    """Change a job (or a DAG: same hash and timer) if it is still at ``version``.
    ``next_fire``: ms, "" to remove the timer entry, "=" to keep it. ``actor`` did it,
    ``change`` (update, pause, resume) goes into the change log. ``queue`` as stored
    (core/queues.py), None to keep it. ``rename``: a job's name at ``version`` and its
    new one, for the shard's index of names. ``revive``: a deleted DAG may come back (its
    next incarnation). Reply {JobReply, ...}."""
    keys = (sk.job(job_id), sk.timer, sk.segments(job_id), sk.versions(job_id), sk.resumes)
    return UPDATE_JOB.call(
        (*keys, sk.changes(job_id)),
        (
            job_id,
            version,
            spec_json,
            timing_json,
            status,
            next_fire,
            lease_ms,
            g.wake_channel,
            sk.shard,
            "1" if roll else "0",
            pause_reason,
            "" if paused_until_ms is None else paused_until_ms,
            "" if auto_pause_after is None else auto_pause_after,
            actor,
            change,
            detail,
            "=" if queue is None else queue,
            *rename,
            "1" if revive else "0",
            "" if deadman_ms is None else deadman_ms,
        ),
    )


DELETE_JOB = signature(
    "delete_job",
    keys=("job", "timer", "segs", "versions", "changes"),
    argv=("job id", "wake channel", "shard", "actor", "name"),
)


def delete_job(sk: ShardKeys, g: GlobalKeys, job_id: str, actor: str, name: str = "") -> Call:
    """Delete a job or a DAG, keeping its history (``name``: a job's, which leaves the
    shard's index of names); reply {JobReply, now_ms}."""
    keys = (sk.job(job_id), sk.timer, sk.segments(job_id), sk.versions(job_id))
    argv = (job_id, g.wake_channel, sk.shard, actor, name)
    return DELETE_JOB.call((*keys, sk.changes(job_id)), argv)


TRIGGER = signature(
    "trigger",
    keys=("job", "ready"),
    argv=("base", "job id", "actor", "args", "idempotency key", "key ttl"),
)


def trigger(
    sk: ShardKeys,
    job_id: str,
    actor: str,
    args_json: bytes = b"",
    idempotency_key: str = "",
    key_ttl_ms: int = 0,
) -> Call:
    """A manual run now, with ``args_json`` instead of the job's args when given; reply
    {JobReply, run_id, now_ms, queues} (REPEATED: the key's first run, and no queues). The
    caller wakes a worker of the queue (store/ready.py)."""
    return TRIGGER.call(
        (sk.job(job_id), sk.ready),
        (sk.base, job_id, actor, args_json, idempotency_key, key_ttl_ms),
    )


BACKFILL = signature(
    "backfill",
    keys=("job", "ready"),
    argv=("base", "job id", "max concurrent", "actor", "window", "band", "pace ms"),
    item=("*",),
)


def backfill(
    sk: ShardKeys,
    job_id: str,
    max_concurrent: int,
    ticks: Sequence[int],
    actor: str,
    window: str,
    band: str = "^l",
    pace_ms: int = 0,
) -> Call:
    """Queue ticks to run as backfill (``pace_ms``: at most one per that many ms, released
    by the owner's pacer); reply {JobReply, queued, already, released, queues} (the caller
    wakes a worker of each queue when some were released)."""
    return BACKFILL.call(
        (sk.job(job_id), sk.ready),
        (sk.base, job_id, max_concurrent, actor, window, band, pace_ms),
        ticks,
    )


RELEASE_PACED = signature(
    "release_paced",
    keys=("bfpace", "epoch", "ready"),
    argv=("epoch", "base", "count"),
)


def release_paced(sk: ShardKeys, epoch: int, count: int = 1000) -> Call:
    """Release what the shard's paced backfills' paces allow now (fenced); reply
    {1, released, queues} or {-1} when the epoch is stale."""
    return RELEASE_PACED.call((sk.backfill_pace, sk.epoch, sk.ready), (epoch, sk.base, count))


class Quarantined(enum.IntEnum):
    QUARANTINED = 1
    CHANGED = 0  #: the job changed meanwhile: nothing written, plan it afresh
    STALE_EPOCH = -1


QUARANTINE = signature(
    "quarantine",
    keys=("job", "timer", "segs", "versions", "epoch", "stats"),
    argv=("epoch", "job id", "score", "reason"),
)


def quarantine(sk: ShardKeys, epoch: int, job_id: str, score: Any, reason: str) -> Call:
    """Pause a job its owner cannot plan (fenced); reply :class:`Quarantined`."""
    return QUARANTINE.call(
        (sk.job(job_id), sk.timer, sk.segments(job_id), sk.versions(job_id), sk.epoch, sk.stats),
        (epoch, job_id, score, reason),
    )


INDEX_NAMES = signature(
    "index_names", keys=("jobs", "epoch", "indexed"), argv=("epoch", "base", "count")
)


def index_names(sk: ShardKeys, epoch: int, count: int = 2000) -> Call:
    """The owner adds a slice of the shard's older jobs to its index of names (fenced);
    reply {1, added} more to come, {0, added} done, {-1} stale epoch."""
    keys = (sk.jobs, sk.epoch, sk.names_indexed)
    return INDEX_NAMES.call(keys, (epoch, sk.base, count))
