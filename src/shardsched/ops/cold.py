"""The cold half of a job's history: runs that left Redis under retention, read from the
deployment's archive (``store/archive.py``) so every reader answers one history.

Hot wins: a run still in Redis is the truth, and its archived copy (written just before
a removal that did not happen, or happened after a crash) is never shown beside it.
These reads are blocking file or S3 I/O inside an operation's step: the router and the
async SDK run steps in a worker thread (``store/calls.drive_off_loop``), the SDK and the
CLI in their own calling thread; the shard owner, whose loop fires jobs, never calls them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from shardsched.core.ids import parse_dag_run_id, parse_run_id
from shardsched.core.models import RunState
from shardsched.core.views import Run
from shardsched.ops.pagination import Cursor
from shardsched.store import keys as k
from shardsched.store.archive_rows import ArchivedRecord, ArchivedRun
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment

if TYPE_CHECKING:
    from shardsched.store.archive import Archive


def _open(url: str) -> Archive:
    """The archive at ``url``, importing pyarrow (180 ms) only when history is read
    from one: a process that never reads the archive (a CLI call, a worker) never pays."""
    from shardsched.store.archive import open_archive

    return open_archive(url)


T = TypeVar("T")


def archive_url(dep: Deployment) -> Op:
    """Where the deployment's archive is (the nodes record it at start), or None. Read
    per request, so a reader started before the archive was set up still finds it."""
    (url,) = yield [Call(("HGET", dep.globals.meta, "archive"))]
    url = check(url)
    return url.decode() if url else None


def cold_run(dep: Deployment, url: str | None, rid: str) -> ArchivedRun | None:
    """The archived copy of a run, if any."""
    if not url:
        return None
    return _open(url).run(dep.keys_for(rid).shard, rid)


def cold_page(
    dep: Deployment,
    url: str | None,
    job_id: str,
    after: Cursor | None,
    lo: float,
    hi: float,
    state: RunState | None,
    n: int,
) -> list[ArchivedRun]:
    """A job's archived runs strictly after ``after`` in the runs index's order (newest
    first), scheduled within [lo, hi] and in ``state``; at most ``n``."""
    if not url:
        return []
    top = min(hi, after.score) if after else hi
    found = _open(url).runs_of(dep.keys_for(job_id).shard, job_id, lo, top)
    out = []
    for item in found:  # newest first already
        if after is not None and not Cursor(*item.key) < after:
            continue
        if state is not None and item.run.state != state:
            continue
        out.append(item)
        if len(out) == n:
            break
    return out


def merge_page(
    hot: Sequence[tuple[Cursor, T]],
    hot_more: Cursor | None,
    cold: Iterable[tuple[Cursor, T]],
    limit: int,
) -> tuple[list[T], Cursor | None]:
    """One page of hot items and cold items (each with its index entry), newest first.

    ``hot_more`` is where the hot scan stopped with more to come: cold items past it wait
    for the next page, whose cursor is then at most there."""
    rows: dict[bytes, tuple[Cursor, T]] = {}
    for key, item in cold:
        if hot_more is None or not key < hot_more:
            rows[key.member] = (key, item)
    for key, run in hot:  # hot wins
        rows[key.member] = (key, run)
    ordered = sorted(rows.values(), key=lambda row: row[0], reverse=True)
    page = ordered[:limit]
    if len(ordered) > limit:
        return [run for _, run in page], page[-1][0]
    return [run for _, run in page], hot_more


class ColdHistory(NamedTuple):
    #: per job (or DAG), its archived first attempts of scheduled ticks (or DAG runs):
    #: the audit's firings, as (run id, tick ms, created ms, a backfill's)
    firsts: dict[str, list[tuple[str, int, int, bool]]]
    #: per job, its archived runs: run id -> (state, the attempt that followed)
    states: dict[str, dict[str, tuple[str, str | None]]]
    #: per job, its archived skip records ("first:last:count:reason:decided")
    skips: dict[str, list[bytes]]


def cold_history(dep: Deployment, url: str | None, job_ids: Sequence[str]) -> ColdHistory:
    """What the audit needs of these jobs' archived runs (no outputs are read)."""
    out = ColdHistory({}, {}, {})
    if not url or not job_ids:
        return out
    archive = _open(url)
    by_shard: dict[int, list[str]] = {}
    for job_id in job_ids:
        by_shard.setdefault(dep.keys_for(job_id).shard, []).append(job_id)
    columns = ["job_id", "attempt", "created_at", "backfill", "state", "next_run_id"]
    for shard, ids in by_shard.items():
        for record in archive.records(shard, "skip", ids):
            out.skips.setdefault(record.owner_id, []).append(record.record_id.encode())
        for record in archive.records(shard, "dag_run", [i for i in ids if k.is_dag_id(i)]):
            tick = parse_dag_run_id(record.record_id)[1]
            if not tick.startswith("t"):  # a manual DAG run fires no tick
                created = int(record.fields["c"])
                entry = (record.record_id, int(tick), created, "bf" in record.fields)
                out.firsts.setdefault(record.owner_id, []).append(entry)
        for row in archive.jobs_runs(shard, ids, columns):
            rid: str = row["run_id"]
            out.states.setdefault(row["job_id"], {})[rid] = (row["state"], row["next_run_id"])
            tick = parse_run_id(rid).tick
            if row["attempt"] != 1 or tick.startswith("t"):
                continue  # a retry, or a manual run: not a firing of a tick
            created = round(row["created_at"].timestamp() * 1000)
            out.firsts.setdefault(row["job_id"], []).append(
                (rid, int(tick), created, bool(row["backfill"]))
            )
    return out


def cold_runs(dep: Deployment, url: str | None, rids: Sequence[str]) -> dict[str, Run]:
    """The archived copies of these runs, by run id (one query per shard)."""
    out: dict[str, Run] = {}
    if not url or not rids:
        return out
    by_shard: dict[int, list[str]] = {}
    for rid in rids:
        by_shard.setdefault(dep.keys_for(rid).shard, []).append(rid)
    archive = _open(url)
    for shard, ids in by_shard.items():
        for item in archive.runs_by_id(shard, ids):
            out[item.run.run_id] = item.run
    return out


def cold_dag_runs(
    dep: Deployment,
    url: str | None,
    dag_id: str,
    after: Cursor | None = None,
    lo: float = float("-inf"),
    hi: float = float("inf"),
    n: int | None = None,
    drid: str | None = None,
) -> list[tuple[Cursor, ArchivedRecord]]:
    """A DAG's archived DAG runs (or the one ``drid``) strictly after ``after``, within
    [lo, hi], newest first, each with its runs-index entry; at most ``n``."""
    if not url:
        return []
    top = min(hi, after.score) if after else hi
    archive = _open(url)
    found = archive.records(dep.keys_for(dag_id).shard, "dag_run", [dag_id], drid, lo, top)
    out = []
    for record in found:
        key = Cursor(float(record.fields["s"]), record.record_id.encode())
        if after is not None and not key < after:
            continue
        out.append((key, record))
        if n is not None and len(out) == n:
            break
    return out
