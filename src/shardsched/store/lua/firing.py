"""The wrapper of fire.lua, the shard owner's hot path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, NamedTuple

from shardsched.core.models import Overlap, Timing
from shardsched.store.calls import Call
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import signature
from shardsched.store.lua.runs import Fenced
from shardsched.store.ready import woken

FIRE = signature(
    "fire",
    keys=("timer", "ready", "epoch", "stats", "retries", "autopause"),
    argv=("epoch", "base", "count", "look-ahead", "missed"),
    item=("job id", "old score", "tick", "new score", "skip record", "overlap", "queue", "planned"),
)


#: The letter fire.lua reads for what a tick does while the job's last run is active.
OVERLAP_CODE = {
    Overlap.ALLOW: "a",
    Overlap.FORBID: "f",
    Overlap.REPLACE: "r",
    Overlap.BUFFER_ONE: "b",
    Overlap.BUFFER_ALL: "B",
    Overlap.CANCEL_OTHER: "c",
}


class FireItem(NamedTuple):
    """One planned timer entry as fire.lua reads it (its 8 ARGV fields, in order); build
    it with :func:`plan` or :func:`drop`."""

    job: Any  #: the timer's member, as fire.lua reported it due
    old: int  #: the score it had then (the compare-and-set)
    tick: int | str  #: the tick to fire, '' for none
    new: int | str  #: the entry's next score, '' to remove it
    skip: str | bytes  #: a skip record ("first:last:count:reason"), '' for none
    overlap: str  #: :data:`OVERLAP_CODE`
    queue: Any = b""  #: the job's queue as stored (core/queues.py), as the due batch said
    #: when the tick runs, if not at the tick: the tick plus the job's spread offset
    planned: int | str = ""


def plan(
    job: Any,
    old: int,
    tick: int | None,
    new: int | None,
    skip: str | bytes | None,
    overlap: Overlap,
    queue: Any = b"",
    offset: int = 0,
    timing: Timing | None = None,
    backlog: str = "",
) -> FireItem:
    """``tick`` and ``skip`` are nominal; ``old`` and ``new`` timer scores, planned: the
    nominal tick plus ``offset`` (the job's spread, core/jitter.py). The ``timing``'s
    ``max_fires`` and deadlines ride on the overlap code (fire.lua reads no job field
    for them): ``:m<n>`` the script counts the job's fires and ends it at the n-th,
    ``:s<ms>``/``:f<ms>`` it indexes the run by its start/finish deadline, ``:k`` a run
    not started by its deadline is skipped; ``backlog``: its queue's default
    backpressure, for a job with none of its own."""
    code = OVERLAP_CODE[overlap]
    # A spread job's run says when it was planned even when its offset happens to be 0.
    spread = bool(offset) or (timing is not None and bool(timing.spread_s))
    if timing is not None:
        if timing.max_fires is not None:
            code += f":m{timing.max_fires}"
        if timing.start_deadline_ms is not None:
            code += f":s{timing.start_deadline_ms}" + (":k" if timing.skip_late_start else "")
        if timing.finish_deadline_ms is not None:
            code += f":f{timing.finish_deadline_ms}"
        # backpressure: ':p<n>' skip, ':c<n>' coalesce, ':g<ms>'; else the queue's default
        code += timing.backlog or backlog

    return FireItem(
        job,
        old,
        "" if tick is None else tick,
        "" if new is None else new,
        "" if skip is None else skip,
        code,
        queue,
        tick + offset if spread and tick is not None else "",
    )


def drop(job: Any, old: int) -> FireItem:
    """Remove a timer entry whose job is gone; fire nothing."""
    return FireItem(job, old, "", "", "", OVERLAP_CODE[Overlap.ALLOW], b"", "")


class Due(NamedTuple):
    """A job fire.lua reported due (or due within the look-ahead)."""

    job: Any  #: the timer's member (bytes)
    score: int  #: its tick (ms)
    timing: bytes  #: the job's timing JSON ('' when its hash is gone)
    queue: bytes  #: its queue as stored (core/queues.py; '' the default's normal band)


def fire(
    sk: ShardKeys,
    *,
    epoch: int,
    count: int,
    lookahead_ms: int,
    missed: int,
    items: Sequence[FireItem],
) -> Call:
    """Fire a batch of planned items and read the next due batch; decode with
    :func:`decode_fired`."""
    return FIRE.call(
        (sk.timer, sk.ready, sk.epoch, sk.stats, sk.retries, sk.autopause),
        (epoch, sk.base, count, lookahead_ms, missed),
        list(chain.from_iterable(items)),
    )


@dataclass(frozen=True, slots=True)
class Fired:
    """What fire.lua answered: the clock, runs created, the next wake-up, due jobs."""

    now_ms: int
    fired: int
    retried: int  #: retry attempts moved to the ready stream
    next_ms: int | None  #: the earliest future timer or retry score; None: none, or due now
    due: list[Due]
    queues: tuple[str, ...] = ("",)  #: the queues that got runs (store/ready.py)
    #: (job, reason) of each tick the overlap policy did not fire (overlap, overlap_buffer_full)
    overlapped: list[tuple[str, str]] = field(default_factory=list)


def decode_fired(reply: Sequence[Any]) -> Fired | int:
    """The reply, or the shard's current epoch when the caller's is stale."""
    if reply[0] == Fenced.STALE_EPOCH:
        return int(reply[1])
    next_ms = reply[4]
    due = [
        Due(reply[i], int(float(reply[i + 1])), reply[i + 2], reply[i + 3])
        for i in range(7, len(reply), 4)
    ]
    queues = woken(reply[5]) if reply[5] else ("",)
    overlapped: list[tuple[str, str]] = []
    if reply[6]:
        text = reply[6].decode() if isinstance(reply[6], bytes) else str(reply[6])
        for one in text.split(","):
            job, _, reason = one.rpartition("|")
            overlapped.append((job, reason))
    return Fired(
        int(reply[1]),
        int(reply[2]),
        int(reply[3]),
        int(next_ms) if next_ms else None,
        due,
        queues,
        overlapped,
    )
