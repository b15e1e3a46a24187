"""The event stream of run transitions, read across shards in time order.

Each shard's scripts append to its capped ``events`` stream (lua/lib/events.lua): one
entry per script call, its fields the run ids that changed, each value
``old>new|worker|detail``. Reading merges the shards' streams by (server time, shard,
entry, position in the entry), which is also the cursor: ``<ms>-<shard>-<seq>-<i>``. A
page never skips an event: it stops at the earliest point some shard was not read past.
Filters by job or run read only that id's shard.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from shardsched.core.errors import ValidationError
from shardsched.core.ids import attempt_of, job_of_run
from shardsched.core.instants import from_ms
from shardsched.core.views import Event, EventList
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.keys import owner_id

#: Stream entries read per shard per round, and rounds per page at most.
_BATCH = 200
_ROUNDS = 20
_CURSOR = re.compile(r"^(\d{1,16})-(-?\d{1,6})-(\d{1,20})-(\d{1,10})$(?!\n)")


class Key(NamedTuple):
    """An event's place in the merged order (and, printed, its cursor)."""

    ms: int
    shard: int
    seq: int
    at: int  #: the event's place within its entry

    def text(self) -> str:
        return f"{self.ms}-{self.shard}-{self.seq}-{self.at}"


def parse_cursor(text: str | None) -> Key | None:
    if text is None:
        return None
    m = _CURSOR.match(text)
    if not m:
        raise ValidationError("not a cursor of the event stream", "$.after")
    return Key(*(int(g) for g in m.groups()))


def _event(key: Key, rid: str, value: str) -> Event:
    transition, _, rest = value.partition("|")
    worker, _, detail = rest.partition("|")
    old, _, new = transition.partition(">")
    attempt = attempt_of(rid)
    return Event(
        at=from_ms(key.ms),
        run_id=rid,
        job_id=job_of_run(rid),
        dag_run_id=k.dag_run_of(rid) if attempt is not None else None,
        attempt=attempt,
        old=old or None,
        new=new,
        worker=worker or None,
        detail=detail or None,
        cursor=key.text(),
    )


def _expand(shard: int, entries: list[Any]) -> list[tuple[Key, str, bytes]]:
    out = []
    for eid, fields in entries:
        ms, _, seq = eid.decode().partition("-")
        for i in range(0, len(fields), 2):
            out.append((Key(int(ms), shard, int(seq), i // 2), fields[i].decode(), fields[i + 1]))
    return out


def events_page(
    dep: Deployment,
    limit: int = 100,
    after: str | None = None,
    since_ms: int | None = None,
    job_id: str | None = None,
    run_id: str | None = None,
    state: str | None = None,
) -> Op:
    """Events after the cursor ``after`` (or from ``since_ms``, or the oldest kept), oldest
    first, at most ``limit``; filtered by job (a DAG's id takes its tasks and DAG runs too),
    run and new state. ``next_cursor`` is where to continue, also when caught up (poll it)."""
    pos_key = parse_cursor(after)
    if pos_key is None and since_ms is not None:
        pos_key = Key(since_ms, -1, 0, 0)
    scope = run_id or job_id
    shards: Sequence[int] = [dep.keys_for(owner_id(scope)).shard] if scope else range(dep.n_shards)
    keep = event_filter(job_id, run_id, state)
    out: list[Event] = []
    for _round in range(_ROUNDS):
        replies = yield [
            Call(("XRANGE", dep.shard(s).events, _start(pos_key, s), "+", "COUNT", _BATCH))
            for s in shards
        ]
        found: list[tuple[Key, str, bytes]] = []
        horizon: Key | None = None
        for s, reply in zip(shards, replies, strict=True):
            entries = check(reply)
            found += _expand(s, entries)
            if len(entries) == _BATCH:  # more after this: nothing past its last entry yet
                ms, _, seq = entries[-1][0].decode().partition("-")
                last = Key(int(ms), s, int(seq), 1 << 30)
                horizon = last if horizon is None or last < horizon else horizon
        found.sort()
        for key, rid, value in found:
            if pos_key is not None and key <= pos_key:
                continue
            if horizon is not None and key > horizon:
                break
            event = _event(key, rid, value.decode())
            pos_key = key
            if keep(event):
                out.append(event)
                if len(out) == limit:
                    return EventList(events=out, next_cursor=key.text())
        if horizon is None:  # every shard read to its end: caught up
            break
        pos_key = horizon if pos_key is None or horizon > pos_key else pos_key
    cursor = None if pos_key is None or pos_key.shard < 0 else pos_key.text()
    return EventList(events=out, next_cursor=cursor or after)


def _start(pos: Key | None, shard: int) -> str:
    """Where shard ``shard``'s stream continues after ``pos`` in the merged order: the
    entry holding ``pos`` itself (it may be read part-way), else the first entry after."""
    if pos is None:
        return "-"
    if shard == pos.shard:
        return f"{pos.ms}-{pos.seq}"
    return f"{pos.ms + 1 if shard < pos.shard else pos.ms}-0"


def event_filter(
    job_id: str | None, run_id: str | None, state: str | None
) -> Callable[[Event], bool]:
    """Whether an event is of the job (a DAG's id: its tasks and DAG runs too), the run
    and the new state asked for (None: any)."""

    def keep(e: Event) -> bool:
        return (
            (job_id is None or e.job_id == job_id or owner_id(e.run_id) == job_id)
            and (run_id is None or e.run_id == run_id)
            and (state is None or e.new == state)
        )

    return keep
