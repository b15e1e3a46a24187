"""The wrappers of liveness: finding active jobs with no timer entry and no reason why
(check_timers.lua), and putting their entries back as a recorded decision
(repair_timers.lua), and the watch over deadlines and dead-man's switches
(deadlines.lua). Used by the owner's maintenance, shard/liveness.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from shardsched.store.calls import Call
from shardsched.store.keys import GlobalKeys, ShardKeys
from shardsched.store.lua import signature

CHECK_TIMERS = signature(
    "check_timers", keys=("jobs", "timer", "epoch"), argv=("epoch", "base", "start", "count")
)
REPAIR_TIMERS = signature(
    "repair_timers",
    keys=("timer", "epoch", "stats"),
    argv=("epoch", "base", "wake channel", "shard"),
    item=("job id", "score"),
)


@dataclass(frozen=True, slots=True)
class Lost:
    """An active job found with no timer entry, and what its ledger knows last."""

    job: str
    timing: bytes
    last_run: int | None  #: its newest run's tick
    last_skip: int | None  #: the last tick of its newest skip record
    first: int | None  #: its first timer score


def check_timers(sk: ShardKeys, epoch: int, start: int, count: int) -> Call:
    """A slice of the shard's jobs looked at; decode with :func:`decode_checked`."""
    return CHECK_TIMERS.call((sk.jobs, sk.timer, sk.epoch), (epoch, sk.base, start, count))


def decode_checked(reply: Sequence[Any]) -> tuple[int, list[Lost]] | None:
    """(the rank to go on from, 0 to start over; the jobs found lost), or None when the
    caller's epoch is stale."""
    if reply[0] != 1:
        return None
    lost = []
    for i in range(2, len(reply), 5):
        run, skip, first = reply[i + 2], reply[i + 3], reply[i + 4]
        last_skip = int(skip.decode().split(":")[1]) if skip else None
        lost.append(
            Lost(
                reply[i].decode(),
                reply[i + 1],
                int(float(run)) if run else None,
                last_skip,
                int(first) if first else None,
            )
        )
    return int(reply[1]), lost


def repair_timers(
    sk: ShardKeys, g: GlobalKeys, epoch: int, items: Sequence[tuple[str, int | None]]
) -> Call:
    """Put the entries back (a score None marks the job exhausted); reply {1, n, jobs…}
    or {-1} when the epoch is stale."""
    flat = chain.from_iterable((job, "" if at is None else at) for job, at in items)
    return REPAIR_TIMERS.call(
        (sk.timer, sk.epoch, sk.stats), (epoch, sk.base, g.wake_channel, sk.shard), list(flat)
    )


DEADLINES = signature(
    "deadlines",
    keys=("deadlines", "deadman", "epoch", "stats"),
    argv=("epoch", "base", "count"),
)


@dataclass(frozen=True, slots=True)
class Missed:
    """What one look at a shard's deadlines found."""

    started_late: int  #: runs not started by their start deadline
    finished_late: int  #: runs not finished by their finish deadline
    skipped: int  #: of the started late, skipped (their job asked for it)
    silent: list[str]  #: jobs whose dead-man's switch fired


def deadlines(sk: ShardKeys, epoch: int, count: int = 1000) -> Call:
    """Look at the shard's due deadlines and dead-man's switches (fenced); decode with
    :func:`decode_missed`."""
    w = sk.watch
    return DEADLINES.call((w.deadlines, w.deadman, sk.epoch, sk.stats), (epoch, sk.base, count))


def decode_missed(reply: Sequence[Any]) -> Missed | None:
    """None when the caller's epoch is stale."""
    if reply[0] != 1:
        return None
    silent = [j.decode() if isinstance(j, bytes) else str(j) for j in reply[5:]]
    return Missed(int(reply[1]), int(reply[2]), int(reply[3]), silent)
