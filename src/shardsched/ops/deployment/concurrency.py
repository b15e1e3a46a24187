"""Concurrency keys (core/concurrency.py): set, clear, read and list their limits for the
router, the SDK and the CLI, and release runs that will not start after all.

Giving waiting runs their turn is store/turns.py's, shared with the worker and the
owner's sweep, which talk to the store and never to an operation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from shardsched.core.concurrency import (
    KeyList,
    KeyView,
    LimitChange,
    LimitRequest,
    RateLimit,
)
from shardsched.core.errors import NotFoundError
from shardsched.core.instants import from_ms
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import concurrency as lua
from shardsched.store.turns import give_turns

#: The newest entries of a key's change log a read shows.
CHANGES_SHOWN = 20
_change_decoder = msgspec.json.Decoder(LimitChange)
_encoder = msgspec.json.Encoder()


def _turns_then_wake(dep: Deployment, key: str, turns: Sequence[str]) -> Op:
    wakes = yield from give_turns(dep, key, turns)
    if wakes:
        yield ready.push_wakes(dep.globals, wakes)


def release_runs(dep: Deployment, runs: Iterable[tuple[str, str]]) -> Op:
    """Runs that will not start after all (cancelled while scheduled or waiting): each
    ``(key, run id)`` stops holding or waiting on its key, and the runs next in line get
    their turn."""
    by_key: dict[str, list[str]] = defaultdict(list)
    for key, rid in runs:
        by_key[key].append(rid)
    for key, rids in sorted(by_key.items()):
        (reply,) = yield [lua.ck_release(dep.concurrency(key), rids)]
        yield from _turns_then_wake(dep, key, list(lua.decode_turns(check(reply))))


def set_limits(dep: Deployment, key: str, request: LimitRequest, actor: str) -> Op:
    """Set the key's own limit and rate (what the request leaves out is cleared), in
    effect at the next start, and recorded in its change log."""
    change = LimitChange(from_ms(0), actor, request.limit, request.rate)
    rate = None
    if request.rate is not None:
        rate = (request.rate.max, max(round(request.rate.per_s * 1000), 1))
    yield [Call(("SADD", dep.globals.limited_keys, key))]
    (reply,) = yield [lua.ck_set(dep.concurrency(key), request.limit, rate, _change_json(change))]
    yield from _turns_then_wake(dep, key, [_text(r) for r in check(reply)[1:]])
    return (yield from get_key(dep, key))


def clear_limits(dep: Deployment, key: str, actor: str) -> Op:
    """Remove the key's own limits: its jobs' ``concurrency_limit`` holds again, if any."""
    (member,) = yield [Call(("SISMEMBER", dep.globals.limited_keys, key))]
    if not check(member):
        raise NotFoundError(f"concurrency key {key!r} has no limits of its own")
    change = LimitChange(from_ms(0), actor, cleared=True)
    (reply,) = yield [lua.ck_set(dep.concurrency(key), None, None, _change_json(change))]
    yield [Call(("SREM", dep.globals.limited_keys, key))]
    yield from _turns_then_wake(dep, key, [_text(r) for r in check(reply)[1:]])
    return (yield from get_key(dep, key))


def _change_json(change: LimitChange) -> bytes:
    """A change as its log stores it; the script prefixes the server's time, which is the
    change's (its own ``at`` is a placeholder)."""
    return _encoder.encode(change)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _reads(dep: Deployment, key: str) -> list[Call]:
    ck = dep.concurrency(key)
    return [
        Call(("HMGET", ck.limits, "limit", "rmax", "rper")),
        Call(("HGET", ck.state, "jl")),
        Call(("ZCARD", ck.holders)),
        Call(("ZCARD", ck.waiting)),
        Call(("ZRANGE", ck.waiting, 0, 0, "WITHSCORES")),
        Call(("LRANGE", ck.changes, 0, CHANGES_SHOWN - 1)),
    ]


_READS_PER_KEY = 6  #: the calls of :func:`_reads`


def _view(key: str, now_ms: int, replies: Sequence[Any]) -> KeyView:
    (limit, rmax, rper), job_limit, holding, waiting, head, changes = (check(r) for r in replies)
    oldest = None
    if head:
        oldest = max(now_ms - int(float(head[1])) // 1000, 0) / 1000
    return KeyView(
        key=key,
        limit=int(limit) if limit else None,
        rate=RateLimit(int(rmax), int(rper) / 1000) if rmax and rper else None,
        job_limit=int(job_limit) if job_limit else None,
        running=int(holding),
        waiting=int(waiting),
        oldest_wait_s=oldest,
        changes=[_change(raw) for raw in changes],
    )


def _change(raw: bytes) -> LimitChange:
    at, _, body = raw.partition(b"|")
    return msgspec.structs.replace(_change_decoder.decode(body), at=from_ms(int(at)))


#: Runs named of a key's holders and of its waiting runs (``concurrency get``).
RUNS_SHOWN = 20


def get_key(dep: Deployment, key: str) -> Op:
    """A key's limits, which runs hold and wait on it (the first RUNS_SHOWN of each, in
    order), and its recent changes."""
    ck = dep.concurrency(key)
    replies = yield [
        Call(("TIME",)),
        *_reads(dep, key),
        Call(("ZRANGE", ck.holders, 0, RUNS_SHOWN - 1)),
        Call(("ZRANGE", ck.waiting, 0, RUNS_SHOWN - 1)),
    ]
    view = _view(key, server_ms(check(replies[0])), replies[1 : 1 + _READS_PER_KEY])
    holding, waiting = (check(r) for r in replies[1 + _READS_PER_KEY :])
    view.holding_runs = [_text(r) for r in holding]
    view.waiting_runs = [_text(r) for r in waiting]
    return view


def list_keys(dep: Deployment) -> Op:
    """Every key with limits of its own or runs waiting on it, by name."""
    g = dep.globals
    limited, waited = yield [
        Call(("SMEMBERS", g.limited_keys)),
        Call(("SMEMBERS", g.waiting_keys)),
    ]
    keys = sorted({_text(k) for k in (*check(limited), *check(waited))})
    calls = [Call(("TIME",))]
    for key in keys:
        calls += _reads(dep, key)
    replies = yield calls
    now_ms = server_ms(check(replies[0]))
    n = _READS_PER_KEY
    views = [_view(key, now_ms, replies[1 + i * n : 1 + (i + 1) * n]) for i, key in enumerate(keys)]
    return KeyList(keys=views)
