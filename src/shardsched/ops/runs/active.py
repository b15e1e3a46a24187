"""What is under way now, across jobs: runs running, queued (scheduled, not claimed yet),
waiting on a concurrency key, or retrying (``GET /api/v1/runs?state=running``).

No index is kept for this on the hot path: a page walks the shards in order, and within a
shard the places such runs are (running and queued: the ready streams, each queue's,
whose entries stay until a run's end acknowledges them; waiting: the shard's ``waiting``
set; retrying: its ``retries`` set), reading each run's record and keeping those in the
state asked for that pass the filters. Like every filtered list here, a page examines at
most :data:`~shardsched.ops.listing.SCAN_BUDGET` entries and may come back short with a
``next_cursor``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from shardsched.core.labels import LabelsOnly, matches
from shardsched.core.views import Run, RunList
from shardsched.ops.access.teams import spec_name
from shardsched.ops.listing import SCAN_BUDGET
from shardsched.ops.pagination import Cursor
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.keys import ShardKeys, owner_id
from shardsched.store.records import RUN_FIELDS, run_record, run_view

#: Entries read from one place per round trip.
_BATCH = 200
#: Places read per round trip.
_PLACES = 64
_labels = msgspec.json.Decoder(LabelsOnly)


class Active(enum.StrEnum):
    """The states a run is listed by across jobs."""

    RUNNING = "running"
    QUEUED = "queued"  #: scheduled: on its ready stream, not claimed yet
    WAITING = "waiting"
    RETRYING = "retrying"

    @classmethod
    def parse(cls, text: str) -> Active:
        return cls.QUEUED if text == "scheduled" else cls(text)


_RECORD_STATES = {
    Active.RUNNING: ("running", "claimed"),
    Active.QUEUED: ("scheduled",),
    Active.WAITING: ("waiting",),
    Active.RETRYING: ("retrying",),
}


class Filters(msgspec.Struct, frozen=True):
    job_id: str | None = None  #: a job's runs (a DAG's id: its tasks' runs)
    queue: str | None = None
    worker: str | None = None
    labels: dict[str, str] = {}
    within: tuple[str, ...] = ()  #: a team's name prefixes

    def keeps(self, run: Run) -> bool:
        if (
            self.job_id is not None
            and run.job_id != self.job_id
            and owner_id(run.run_id) != self.job_id
        ):
            return False
        if self.queue is not None and run.queue != self.queue:
            return False
        return self.worker is None or run.claimed_by == self.worker


@dataclass(slots=True)
class _Place:
    """One place runs wait in line, and how far a page has read it."""

    shard: int
    index: int  #: its place among the shard's
    key: str
    pos: bytes | None = None  #: the position read up to (None: from its start)


def _places(sk: ShardKeys, state: Active, queues: Sequence[bytes]) -> list[str]:
    if state is Active.WAITING:
        return [sk.waiting]
    if state is Active.RETRYING:
        return [sk.retries]
    return [sk.ready] + [sk.ready_of(q.decode()) for q in sorted(queues)]


def _read(place: str, state: Active, after: bytes | None) -> Call:
    if state in (Active.RUNNING, Active.QUEUED):
        start = b"-" if after is None else b"(" + after
        return Call(("XRANGE", place, start, "+", "COUNT", _BATCH))
    # sets by score (since, due); a member's position is "score member"
    start = b"-inf" if after is None else after.partition(b" ")[0]
    return Call(("ZRANGE", place, start, "+inf", "BYSCORE", "LIMIT", 0, _BATCH, "WITHSCORES"))


def _entries(reply: Any, state: Active, after: bytes | None) -> list[tuple[bytes, str]]:
    """(position, run id) in order, strictly after ``after``."""
    if state in (Active.RUNNING, Active.QUEUED):
        return [(eid, fields[1].decode()) for eid, fields in reply]  # 'r' <run id>
    pairs = [(reply[i + 1] + b" " + reply[i], reply[i].decode()) for i in range(0, len(reply), 2)]
    if after is not None:
        pairs = [p for p in pairs if _zkey(p[0]) > _zkey(after)]
    return pairs


def _zkey(position: bytes) -> tuple[float, bytes]:
    score, _, member = position.partition(b" ")
    return float(score), member


def active_page(
    dep: Deployment,
    state: Active,
    limit: int = 50,
    cursor: Cursor | None = None,
    filters: Filters | None = None,
) -> Op:
    """Up to ``limit`` runs in ``state`` that pass ``filters``, by shard and then by place
    in line; the cursor is (shard and place, position)."""
    filters = filters or Filters()
    shard0, place0 = (0, 0) if cursor is None else divmod(int(cursor.score), 1_000_000)
    pos0 = None if cursor is None else cursor.member or None
    shards = list(range(shard0, dep.n_shards))
    if state in (Active.RUNNING, Active.QUEUED):
        queues = yield [Call(("SMEMBERS", dep.shard(s).queues)) for s in shards]
    else:
        queues = [[] for _ in shards]
    todo = [
        _Place(s, i, place, pos0 if (s, i) == (shard0, place0) else None)
        for s, qs in zip(shards, queues, strict=True)
        for i, place in enumerate(_places(dep.shard(s), state, check(qs)))
        if (s, i) >= (shard0, place0)
    ]
    out: list[Run] = []
    examined = 0
    while todo:
        round_ = todo[:_PLACES]
        replies = yield [_read(p.key, state, p.pos) for p in round_]
        found: list[tuple[_Place, bytes, str]] = []  # (place, position, run id)
        done = 0
        for p, reply in zip(round_, replies, strict=True):
            entries = _entries(check(reply), state, p.pos)
            found += [(p, pos, rid) for pos, rid in entries]
            if len(check(reply)) >= _BATCH * (1 if state in (Active.RUNNING, Active.QUEUED) else 2):
                break  # this place has more: read on from it before the next
            done += 1
        runs = yield from _runs(dep, [rid for _, _, rid in found], state, filters)
        for (p, pos, _rid), run in zip(found, runs, strict=True):
            p.pos = pos
            if run is not None:
                out.append(run)
                if len(out) == limit:
                    return RunList(out, _cursor(p))
        examined += len(found)
        del todo[:done]
        if examined >= SCAN_BUDGET and todo:
            return RunList(out, _cursor(todo[0]))
    return RunList(out, None)


def _cursor(place: _Place) -> str:
    """The place and the position read up to (b"": none yet, its first entry is next)."""
    return Cursor(place.shard * 1_000_000 + place.index, place.pos or b"").encode()


def _runs(dep: Deployment, rids: list[str], state: Active, filters: Filters) -> Op:
    """Each run if it is in ``state`` and passes ``filters``, else None."""
    if not rids:
        return []
    replies = yield [Call(("HMGET", dep.keys_for(r).run(r), *RUN_FIELDS)) for r in rids]
    wanted = _RECORD_STATES[state]
    runs: list[Run | None] = []
    for rid, reply in zip(rids, replies, strict=True):
        record = run_record(check(reply))
        ok = record is not None and record.state in wanted
        run = run_view(rid, record) if ok and record is not None else None
        runs.append(run if run is not None and filters.keeps(run) else None)
    if filters.labels or filters.within:
        owners = sorted({owner_id(r.run_id) for r in runs if r is not None})
        specs = yield [Call(("HGET", dep.keys_for(o).job(o), "spec")) for o in owners]
        spec_of = dict(zip(owners, (check(s) for s in specs), strict=True))
        for i, run in enumerate(runs):
            if run is None:
                continue
            spec = spec_of.get(owner_id(run.run_id))
            name = spec_name(spec)
            if (filters.within and not (name and name.startswith(filters.within))) or (
                filters.labels
                and not (spec and matches(_labels.decode(spec).labels, filters.labels))
            ):
                runs[i] = None
    return runs
