"""Paginated, filtered lists: jobs, a job's runs, dead letters, DAGs, a DAG's runs.

Each is an operation (:mod:`shardsched.ops` style) returning a page Struct with
``next_cursor`` (None on the last page). Filters that the index cannot answer (a job's
status or name, a run's state) are applied while scanning: a page examines at most
:data:`SCAN_BUDGET` entries, so a selective filter may answer a short page with a
``next_cursor``; keep following it until it is None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shardsched.core.errors import DagNotFound, JobNotFound, ValidationError
from shardsched.core.models import JobStatus, RunState
from shardsched.core.views import DagList, DagRunList, JobList, RunList
from shardsched.ops.access.teams import spec_name
from shardsched.ops.cold import archive_url, cold_dag_runs, cold_page, merge_page
from shardsched.ops.dags import dag_runs
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.jobs.read_page import list_filter, read_jobs, read_kept_jobs
from shardsched.ops.pagination import Cursor, zpage
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.keys import owner_id
from shardsched.store.records import RUN_FIELDS, dag_run_from, run_record, run_view

#: Entries a filtered page looks at, at most, before answering what it found so far.
SCAN_BUDGET = 5000
#: Entries read per round trip while scanning with a filter.
_SCAN_BATCH = 250

Entries = list[tuple[float, bytes]]


def _scan(
    keys: Sequence[str],
    after: Cursor | None,
    limit: int,
    read: Callable[[Entries], Op],
    keep: Callable[[Any], bool] | None,
    lo: float = float("-inf"),
    hi: float = float("inf"),
) -> Op:
    """Up to ``limit`` objects read from the entries after ``after`` that ``keep`` keeps;
    returns (objects, next cursor or None)."""
    out: list[Any] = []
    examined = 0
    greedy = False  # a first round as for no filter; a filter that left the page short
    while True:  # then reads greedily (pagination.zpage): each entry about once
        batch = limit if keep is None else max(limit, _SCAN_BATCH)
        entries, more = yield from zpage(keys, after, batch, lo, hi, greedy=greedy)
        greedy = keep is not None
        objs = (yield from read(entries)) if entries else []
        for i, (entry, obj) in enumerate(zip(entries, objs, strict=True)):
            if obj is not None and (keep is None or keep(obj)):
                out.append(obj)
                if len(out) == limit:
                    rest = i + 1 < len(entries) or more is not None
                    return out, Cursor(*entry) if rest else None
        examined += len(entries)
        if more is None:
            return out, None
        after = more
        if examined >= SCAN_BUDGET:
            return out, more


def _any(item: Any) -> bool:
    return True


def _encode(cursor: Cursor | None) -> str | None:
    return None if cursor is None else cursor.encode()


# --- jobs --------------------------------------------------------------------------------


def jobs_page(
    dep: Deployment,
    limit: int = 50,
    cursor: Cursor | None = None,
    status: JobStatus | None = None,
    name_prefix: str | None = None,
    within: tuple[str, ...] = (),
    include_deleted: bool = False,
    labels: dict[str, str] | None = None,
    queue: str | None = None,
    health: str | None = None,
) -> Op:
    """Jobs, newest first, optionally of one status, with a name prefix, labels, a queue,
    and ``health``: ``failing`` (the newest run failed for good) or ``late`` (the next fire
    is over a minute behind the server's clock)."""
    keep = list_filter(status, name_prefix, within, include_deleted, labels, queue)
    if health is not None and keep is None:
        keep = _any
    now_ms = 0
    if health == "late":
        (clock,) = yield [Call(("TIME",))]
        now_ms = server_ms(check(clock))
    keys = [dep.shard(s).jobs for s in range(dep.n_shards)]

    def read(entries: Entries) -> Op:
        if keep is None:
            return (yield from read_jobs(dep, entries))
        # what the filter needs first: most entries a selective one drops
        return (yield from read_kept_jobs(dep, entries, keep, health, now_ms))

    jobs, nxt = yield from _scan(keys, cursor, limit, read, keep)
    return JobList(jobs=jobs, next_cursor=_encode(nxt))


# --- runs --------------------------------------------------------------------------------


def _read_run_entries(dep: Deployment, entries: Entries) -> Op:
    if not entries:
        return []
    rids = [member.decode() for _, member in entries]
    replies = yield [Call(("HMGET", dep.keys_for(rid).run(rid), *RUN_FIELDS)) for rid in rids]
    records = [run_record(check(reply)) for reply in replies]
    return [None if r is None else run_view(rid, r) for rid, r in zip(rids, records, strict=True)]


def runs_page(
    dep: Deployment,
    job_id: str,
    limit: int = 50,
    cursor: Cursor | None = None,
    state: RunState | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
) -> Op:
    """A job's runs, newest first (by scheduled_for, then run id); optionally in one
    state, and scheduled within [since, until]."""
    sk = dep.keys_for(job_id)
    (exists,) = yield [Call(("EXISTS", sk.job(job_id)))]
    if not check(exists) or k.is_dag_id(job_id):
        raise JobNotFound(job_id)
    lo = float("-inf") if since_ms is None else since_ms
    hi = float("inf") if until_ms is None else until_ms
    keep = None if state is None else (lambda run: run.state == state)
    url = yield from archive_url(dep)
    if not url:
        runs, nxt = yield from _scan(
            [sk.runs_of(job_id)], cursor, limit, lambda e: _read_run_entries(dep, e), keep, lo, hi
        )
        return RunList(runs=runs, next_cursor=_encode(nxt))
    # hot and cold: the hot page with its index entries, merged with the archive's page
    pairs, hot_more = yield from _scan(
        [sk.runs_of(job_id)],
        cursor,
        limit,
        lambda e: _read_run_pairs(dep, e),
        None if keep is None else (lambda pair: keep(pair[1])),
        lo,
        hi,
    )
    cold = [
        (Cursor(*a.key), a.run)
        for a in cold_page(dep, url, job_id, cursor, lo, hi, state, limit + 1)
    ]
    merged, nxt = merge_page(pairs, hot_more, cold, limit)
    return RunList(runs=merged, next_cursor=_encode(nxt))


def _aligned(read: Callable[[Entries], Op]) -> Callable[[Entries], Op]:
    """A reader of (entry, item) pairs that may leave some out, made one-per-entry
    (None where an item is gone), as :func:`_scan` wants it."""

    def aligned(entries: Entries) -> Op:
        pairs = yield from read(entries)
        by_member = {pair[0].member: pair for pair in pairs}
        return [by_member.get(member) for _, member in entries]

    return aligned


def _read_run_pairs(dep: Deployment, entries: Entries) -> Op:
    """(index entry, run) of each entry, None for a run gone meanwhile."""
    runs = yield from _read_run_entries(dep, entries)
    return [
        None if run is None else (Cursor(*entry), run)
        for entry, run in zip(entries, runs, strict=True)
    ]


def _read_team_runs(dep: Deployment, entries: Entries, within: tuple[str, ...]) -> Op:
    """The runs of ``entries``, None for those whose job's name is outside ``within``."""
    runs = yield from _read_run_entries(dep, entries)
    names = yield from _names(dep, entries)
    return [
        run if name is not None and name.startswith(within) else None
        for run, name in zip(runs, names, strict=True)
    ]


def dead_letter_page(
    dep: Deployment, limit: int = 100, cursor: Cursor | None = None, within: tuple[str, ...] = ()
) -> Op:
    """Dead-lettered runs of every shard, most recently dead-lettered first; with
    ``within``, only those of jobs named with one of those prefixes (a team's)."""
    keys = [dep.shard(s).dead_letter for s in range(dep.n_shards)]

    def read(entries: Entries) -> Op:
        if within:
            return (yield from _read_team_runs(dep, entries, within))
        return (yield from _read_run_entries(dep, entries))

    runs, nxt = yield from _scan(keys, cursor, limit, read, None)
    return RunList(runs=[r for r in runs if r is not None], next_cursor=_encode(nxt))


#: What the failure inbox lists: runs that ended failed (retried or not) or dead-lettered.
FAILURE_STATES = frozenset({RunState.FAILED, RunState.DEAD_LETTER})


def failures_page(
    dep: Deployment,
    limit: int = 50,
    cursor: Cursor | None = None,
    states: frozenset[RunState] = FAILURE_STATES,
    since_ms: int | None = None,
    until_ms: int | None = None,
    name_prefix: str | None = None,
    within: tuple[str, ...] = (),
) -> Op:
    """The failure inbox: failed and dead-lettered runs of every job, the most recently
    ended first, ended within [since, until]; only ``states``, of jobs (or DAGs) named
    with ``name_prefix``, and of a team's (``within``). Runs still in Redis: those that
    left under retention are in the archive (a job's runs list reads it)."""
    if not states or not states <= FAILURE_STATES:
        raise ValidationError(
            "across all jobs, runs are listed by state failed and dead_letter"
            " (every state of one job: /api/v1/jobs/{id}/runs)",
            "$.state",
        )
    keys = [dep.shard(s).failures for s in range(dep.n_shards)]
    lo = float("-inf") if since_ms is None else since_ms
    hi = float("inf") if until_ms is None else until_ms
    prefixes = within or (() if name_prefix is None else (name_prefix,))

    def read(entries: Entries) -> Op:
        if not prefixes:
            return (yield from _read_run_entries(dep, entries))
        runs = yield from _read_team_runs(dep, entries, prefixes)
        if within and name_prefix:  # the team's, and of those the prefix's
            names = yield from _names(dep, entries)
            runs = [
                r if n and n.startswith(name_prefix) else None
                for r, n in zip(runs, names, strict=True)
            ]
        return runs

    def keep(run: Any) -> bool:
        return bool(run.state in states)

    runs, nxt = yield from _scan(keys, cursor, limit, read, keep, lo, hi)
    return RunList(runs=runs, next_cursor=_encode(nxt))


def _names(dep: Deployment, entries: Entries) -> Op:
    owners = [owner_id(member.decode()) for _, member in entries]
    specs = yield [Call(("HGET", dep.keys_for(o).job(o), "spec")) for o in owners]
    return [spec_name(check(raw)) for raw in specs]


# --- DAGs --------------------------------------------------------------------------------


def _read_dags(dep: Deployment, entries: Entries) -> Op:
    ids = [member.decode() for _, member in entries]
    calls = [dag_ops.dag_calls(dep, dag_id) for dag_id in ids]
    replies = yield [c for each in calls for c in each]
    per = len(calls[0]) if calls else 0
    return [
        dag_ops.dag_from(dep, dag_id, replies[per * n : per * (n + 1)])
        for n, dag_id in enumerate(ids)
    ]


def dags_page(
    dep: Deployment,
    limit: int = 100,
    cursor: Cursor | None = None,
    status: JobStatus | None = None,
    name_prefix: str | None = None,
    within: tuple[str, ...] = (),
    include_deleted: bool = False,
    labels: dict[str, str] | None = None,
) -> Op:
    """DAGs, newest first, optionally of one status, with a name prefix and labels."""
    keep = list_filter(status, name_prefix, within, include_deleted, labels)
    keys = [dep.shard(s).dags for s in range(dep.n_shards)]
    dags, nxt = yield from _scan(keys, cursor, limit, lambda e: _read_dags(dep, e), keep)
    return DagList(dags=dags, next_cursor=_encode(nxt))


def dag_runs_page(
    dep: Deployment,
    dag_id: str,
    limit: int = 50,
    cursor: Cursor | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
) -> Op:
    """A DAG's runs, newest first, each task with its state (attempts: GET the DAG run)."""
    if not k.is_dag_id(dag_id):
        raise DagNotFound(dag_id)
    tasks = yield from dag_runs.task_order(dep, dag_id)
    sk = dep.keys_for(dag_id)

    def read(entries: Entries) -> Op:
        drids = [member.decode() for _, member in entries]
        raws = yield [Call(("HGETALL", sk.dag_run(drid))) for drid in drids]
        return [
            (Cursor(*entry), dag_run_from(drid, check(raw), tasks))
            for entry, drid, raw in zip(entries, drids, raws, strict=True)
            if check(raw)
        ]

    lo = float("-inf") if since_ms is None else since_ms
    hi = float("inf") if until_ms is None else until_ms
    pairs, hot_more = yield from _scan(
        [sk.runs_of(dag_id)], cursor, limit, _aligned(read), None, lo, hi
    )
    cold = []
    url = yield from archive_url(dep)
    for key, record in cold_dag_runs(dep, url, dag_id, cursor, lo, hi, limit + 1):
        run = dag_run_from(record.record_id, dag_runs.record_fields(record), tasks)
        run.archived = True
        cold.append((key, run))
    runs, nxt = merge_page(pairs, hot_more, cold, limit)
    yield from dag_runs.fill_states(dep, runs, with_attempts=False)
    return DagRunList(dag_runs=runs, next_cursor=_encode(nxt))
