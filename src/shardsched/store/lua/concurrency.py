"""Wrappers of the concurrency-key scripts (lua/ck_*.lua, in the key's own hash slot) and
of the two shard scripts that move a run to waiting and back (park_runs, unpark_runs)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, NamedTuple

from shardsched.store.calls import Call
from shardsched.store.keys import CONSUMER_GROUP, ConcurrencyKeys, ShardKeys
from shardsched.store.lua import signature
from shardsched.store.lua.runs import Delivery
from shardsched.store.ready import woken

#: How long a waiting run granted its turn holds the key before a worker claims it; the
#: owner's sweep puts it back on its stream again after that (shard/limits.py).
RESERVE_MS = 30_000
_CK_KEYS = ("holders", "reserved", "waiting", "starts", "state")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


CK_ACQUIRE = signature(
    "ck_acquire", keys=_CK_KEYS, argv=("reserve ms",), item=("run id", "hold ms", "job limit")
)


class Ask(NamedTuple):
    run_id: str
    hold_ms: int
    job_limit: int  #: 0: the job gives none


def ck_acquire(ck: ConcurrencyKeys, asks: Sequence[Ask]) -> Call:
    items: list[Any] = []
    for a in asks:
        items += (a.run_id, a.hold_ms, a.job_limit)
    return CK_ACQUIRE.call(ck.all(), (RESERVE_MS,), items)


class Acquired(NamedTuple):
    now_ms: int
    granted: tuple[bool, ...]  #: per ask: True granted, False waiting
    turns: tuple[str, ...]  #: waiting runs granted their turn (to put back: unpark_runs)


def decode_acquired(reply: Sequence[Any], asked: int) -> Acquired:
    codes = tuple(int(c) == 1 for c in reply[1 : 1 + asked])
    return Acquired(int(reply[0]), codes, tuple(_text(r) for r in reply[1 + asked :]))


CK_RELEASE = signature("ck_release", keys=_CK_KEYS, argv=("reserve ms",), item=("*",))


def ck_release(ck: ConcurrencyKeys, run_ids: Sequence[str]) -> Call:
    """Runs that stop holding (or waiting on) the key; the reply lists the waiting runs
    granted their turn (decode with :func:`decode_turns`)."""
    return CK_RELEASE.call(ck.all(), (RESERVE_MS,), tuple(run_ids))


def decode_turns(reply: Sequence[Any]) -> tuple[str, ...]:
    return tuple(_text(r) for r in reply)


CK_RENEW = signature("ck_renew", keys=("holders",), argv=(), item=("run id", "hold ms"))


def ck_renew(ck: ConcurrencyKeys, holds: Sequence[tuple[str, int]]) -> Call:
    """Reply: a code per hold, 1 renewed, 0 lost (the run must stop)."""
    items: list[Any] = []
    for run_id, hold_ms in holds:
        items += (run_id, hold_ms)
    return CK_RENEW.call((ck.holders,), (), items)


CK_SWEEP = signature("ck_sweep", keys=_CK_KEYS, argv=("reserve ms",))


def ck_sweep(ck: ConcurrencyKeys) -> Call:
    return CK_SWEEP.call(ck.all(), (RESERVE_MS,))


class Swept(NamedTuple):
    now_ms: int
    waiting: int
    holding: int
    oldest_ms: int | None  #: since when the oldest waiting run waits
    turns: tuple[str, ...]  #: runs granted their turn here, and granted ones not claimed


def decode_swept(reply: Sequence[Any]) -> Swept:
    oldest = int(reply[3]) if reply[3] not in (b"", "", None) else None
    turns = tuple(_text(r) for r in reply[5:])
    return Swept(int(reply[0]), int(reply[1]), int(reply[2]), oldest, turns)


CK_SET = signature(
    "ck_set",
    keys=(*_CK_KEYS, "changes"),
    argv=("limit", "rate max", "rate per ms", "change JSON", "reserve ms"),
)


def ck_set(
    ck: ConcurrencyKeys,
    limit: int | None,
    rate: tuple[int, int] | None,
    change_json: bytes,
) -> Call:
    """Set (None: clear) the key's limit and rate (starts, interval ms); reply {now, the
    waiting runs granted their turn}."""
    rmax, rper = rate if rate is not None else ("", "")
    return CK_SET.call(
        (*ck.all(), ck.changes),
        ("" if limit is None else limit, rmax, rper, change_json, RESERVE_MS),
    )


PARK_RUNS = signature(
    "park_runs",
    keys=("ready", "waiting"),
    argv=("group", "worker id", "base"),
    item=("entry id", "run id", "delivery token", "concurrency key"),
)


class Parked(enum.IntEnum):
    """park_runs' code per run."""

    WAITING = 1
    TURN_CAME = 2  #: granted while on the way: back on its stream
    NOT_HELD = 0


def park_runs(sk: ShardKeys, worker_id: str, runs: Sequence[tuple[Delivery, str]]) -> Call:
    """Refused runs (each with its key) leave the worker for 'waiting'; reply {queues
    woken, a :class:`Parked` per run}."""
    items: list[Any] = []
    for d, key in runs:
        items += (d.entry_id, d.run_id, d.token, key)
    return PARK_RUNS.call((sk.ready, sk.waiting), (CONSUMER_GROUP, worker_id, sk.base), items)


UNPARK_RUNS = signature("unpark_runs", keys=("ready", "waiting"), argv=("base",), item=("*",))


class Unparked(enum.IntEnum):
    """unpark_runs' code per run."""

    SCHEDULED = 1
    MARKED = 2  #: its refused worker puts it back (park_runs)
    ALREADY = 3  #: scheduled or running already: it keeps its grant
    GONE = 0  #: give the grant back (ck_release)


def unpark_runs(sk: ShardKeys, run_ids: Sequence[str]) -> Call:
    return UNPARK_RUNS.call((sk.ready, sk.waiting), (sk.base,), tuple(run_ids))


def decode_moved(reply: Sequence[Any]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """park_runs' and unpark_runs' reply: (queues woken, a code per run)."""
    return woken(reply[0]), tuple(int(c) for c in reply[1:])
