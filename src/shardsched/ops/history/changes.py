"""A job's or DAG's change log: who created, changed, paused, resumed, deleted,
triggered, backfilled or retried it, and when, newest first.

The entries are written by the scripts that make the changes (lua/lib/changes.lua), in
the same atomic step. The creation is not an entry: it is read from the record itself
(its creation time, and who made version 1), so a job never changed costs no log key.
"""

from __future__ import annotations

import re
from typing import Any

from shardsched.core.errors import DagNotFound, JobNotFound, ValidationError
from shardsched.core.ids import is_dag_id
from shardsched.core.instants import from_ms
from shardsched.core.views import Change, ChangeList
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.records import change_from_entry, opt_text, parse_version

_ENTRY_ID = re.compile(r"^([0-9]{1,20})-([0-9]{1,20})$(?!\n)")
_U64 = 2**64 - 1  #: a stream entry id's halves are unsigned 64-bit numbers


def _entry_id(cursor: str) -> str:
    """The cursor as Redis writes a stream entry id (no leading zeros); it must be above
    0-0 (a page ends before it, and nothing is before 0-0)."""
    match = _ENTRY_ID.match(cursor)
    ms, seq = (int(match[1]), int(match[2])) if match else (0, 0)
    if ms > _U64 or seq > _U64 or (ms, seq) == (0, 0):
        raise ValidationError("not a cursor of this list", "$.cursor")
    return f"{ms}-{seq}"


def _newest_first(row: Any) -> tuple[int, int]:
    ms, _, seq = row[0].partition(b"-")
    return -int(ms), -int(seq or 0)


def changes(
    dep: Deployment, any_id: str, missing: Exception, limit: int = 50, cursor: str | None = None
) -> Op:
    """The change log of a job or DAG (``missing`` is raised when there is none)."""
    end = "+" if cursor is None else "(" + _entry_id(cursor)
    sk = dep.keys_for(any_id)
    record, entries, acts, first = yield [
        Call(("HMGET", sk.job(any_id), "created", "version", "by")),
        Call(("XREVRANGE", sk.changes(any_id), end, "-", "COUNT", limit + 1)),
        Call(("XREVRANGE", sk.acts(any_id), end, "-", "COUNT", limit + 1)),
        Call(("HGET", sk.versions(any_id), "1")),
    ]
    created, version, by = check(record)
    if created is None:
        raise missing
    # changes and runs by hand, kept in two streams (each capped on its own), newest first
    rows: list[Any] = sorted([*check(entries), *check(acts)], key=_newest_first)
    out = [change_from_entry(eid, fields) for eid, fields in rows[:limit]]
    if len(rows) > limit:
        return ChangeList(id=any_id, changes=out, next_cursor=rows[limit - 1][0].decode())
    kept = check(first)
    creator = parse_version(kept)[2] if kept is not None else (by if version == b"1" else None)
    if len(out) < limit:
        created_at = from_ms(int(created))
        out.append(Change(at=created_at, action="create", by=opt_text(creator), version=1))
        return ChangeList(id=any_id, changes=out)
    # the page is full and the log is done: the creation opens the next page
    return ChangeList(id=any_id, changes=out, next_cursor="0-1")


def job_changes(dep: Deployment, job_id: str, limit: int = 50, cursor: str | None = None) -> Op:
    missing = JobNotFound(job_id)
    if is_dag_id(job_id):
        raise missing
    return (yield from changes(dep, job_id, missing, limit, cursor))


def dag_changes(dep: Deployment, dag_id: str, limit: int = 50, cursor: str | None = None) -> Op:
    missing = DagNotFound(dag_id)
    if not is_dag_id(dag_id):
        raise missing
    return (yield from changes(dep, dag_id, missing, limit, cursor))
