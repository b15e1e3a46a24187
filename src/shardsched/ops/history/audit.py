"""The audit: every tick each job should have had, and what became of it.

For every job (and DAG: a tick is then a DAG run), its schedule segments (opened at
registration, closed and reopened by a pause, a resume, a change of timing, a delete) give
the nominal ticks it should have had up to ``horizon`` (the server's clock less a settle
margin, so in-flight firings are not judged). Each tick is then:

* ``fired``      one run record (attempt 1) exists for it; its lag is created - tick;
* ``skipped``    a recorded policy decision covers it (catch-up ``latest``, ``misfire``…);
* ``pending``    it is still the job's timer entry (durable: it will fire, late);
* ``missing``    none of the above: a lost firing;
* ``duplicated`` more than one run record, or both fired and skipped.

Runs that match no nominal tick are counted as ``unexpected``. Loading is an operation
(:mod:`shardsched.ops` style) so the CLI, the API and the tests read it alike; accounting is
pure.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from shardsched.core.events import UNSETTLED_AFTER_S
from shardsched.core.ids import attempt_of, is_dag_id
from shardsched.core.instants import from_ms
from shardsched.ops.history.backfill_gaps import last_attempts
from shardsched.ops.history.executions import Execution, executions
from shardsched.ops.history.ledger import (
    JobHistory,
    Outcome,
    TickList,
    TickRecord,
    account,
    load_histories,
    load_history,
)
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment


class LagStats(msgspec.Struct):
    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None


def lag_stats(lags: list[float]) -> LagStats:
    if not lags:
        return LagStats(0, None, None, None, None)
    ordered = sorted(lags)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1)], 4)

    return LagStats(len(ordered), pct(0.5), pct(0.9), pct(0.99), round(ordered[-1], 4))


class JobAudit(msgspec.Struct, omit_defaults=True):
    job_id: str
    counts: dict[str, int]
    problems: list[TickRecord] = msgspec.field(default_factory=list)


class AuditReport(msgspec.Struct):
    horizon: datetime
    jobs: int
    expected: int
    fired: int
    skipped: int
    pending: int
    missing: int
    duplicated: int
    unexpected: int
    late: int
    late_after_s: float
    lag_s: LagStats
    skipped_by_reason: dict[str, int]
    problem_jobs: list[JobAudit]
    #: jobs paused by their owner because they could not be planned (a recorded decision)
    quarantined: list[str] = msgspec.field(default_factory=list)
    #: jobs whose schedule the audit itself cannot expand (so neither can the scheduler)
    unplannable: list[str] = msgspec.field(default_factory=list)
    #: what became of the fired runs (their last attempt): terminal, running, queued,
    #: retrying, stranded (see :func:`execution_of`), dag (a DAG run: its tasks' runs tell)
    executions: dict[str, int] = msgspec.field(default_factory=dict)
    stranded_runs: list[str] = msgspec.field(default_factory=list)  #: the first 100
    #: events received (core/events.py): ``received`` (kept), ``pending`` (no outcome
    #: yet), ``unsettled`` (no outcome past UNSETTLED_AFTER_S: a failure)
    events: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def stranded(self) -> int:
        return self.executions.get(Execution.STRANDED, 0)

    @property
    def ok(self) -> bool:
        return (
            self.missing == 0
            and self.duplicated == 0
            and self.stranded == 0
            and not self.events.get("unsettled")
        )


@dataclass
class _Totals:
    counts: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    lags: list[float] = field(default_factory=list)
    unexpected: int = 0
    problems: list[JobAudit] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    unplannable: list[str] = field(default_factory=list)
    fired_rids: list[str] = field(default_factory=list)
    executions: Counter[str] = field(default_factory=Counter)
    stranded: list[str] = field(default_factory=list)


def audit(
    dep: Deployment,
    settle_s: float = 2.0,
    late_after_s: float = 1.0,
    chunk: int = 500,
    stranded_after_s: float = 300.0,
    lag_from: datetime | None = None,
    reference: bool = False,
) -> Op:
    """Account for every job of the deployment; returns an :class:`AuditReport`.

    ``reference``: a cron schedule's expected ticks come from the slow reference model
    (core/cron_reference.py) instead of the engine that scheduled them, so a tick the
    engine lost shows as missing (and one it made up as unexpected).

    ``lag_from``: the lag figures (``lag_s``, ``late``) count only ticks due from then on
    (a bench that registers its jobs before it starts a node: the ticks due meanwhile
    wait for it, and say nothing of how late the scheduler fires).

    Every tick is fired once, skipped by a recorded decision, pending or missing; every
    fired run is then followed to its last attempt and classified (:class:`Execution`): a
    run fired but not running anywhere past ``stranded_after_s`` is *stranded*, and the
    audit is not OK while one is."""
    (now,) = yield [Call(("TIME",))]
    now_ms = server_ms(now)
    horizon = now_ms - round(settle_s * 1000)
    id_lists = yield [Call(("ZRANGE", dep.shard(s).jobs, 0, -1)) for s in range(dep.n_shards)]
    totals = _Totals()
    job_ids = [raw.decode() for ids in id_lists for raw in ids]
    n_jobs = len(job_ids)
    for i in range(0, n_jobs, chunk):
        archived: dict[str, tuple[str, str | None]] = {}
        for history in (yield from load_histories(dep, job_ids[i : i + chunk])):
            archived.update(history.archived)
            if history.quarantined:
                totals.quarantined.append(history.job_id)
            try:
                _add_job(totals, history, horizon, lag_from, reference)
            except Exception:  # a schedule nothing can expand: report it, audit the rest
                totals.unplannable.append(history.job_id)
        fired, totals.fired_rids = totals.fired_rids, []
        for rid, execution in (
            yield from executions(dep, fired, now_ms, round(stranded_after_s * 1000), archived)
        ).items():
            totals.executions[execution] += 1
            if execution == Execution.STRANDED and len(totals.stranded) < 100:
                totals.stranded.append(rid)
    events = yield from _events(dep, now_ms)
    c = totals.counts
    return AuditReport(
        horizon=from_ms(horizon),
        jobs=n_jobs,
        expected=sum(c.values()),
        fired=c[Outcome.FIRED],
        skipped=c[Outcome.SKIPPED],
        pending=c[Outcome.PENDING],
        missing=c[Outcome.MISSING],
        duplicated=c[Outcome.DUPLICATED],
        unexpected=totals.unexpected,
        late=sum(1 for lag in totals.lags if lag > late_after_s),
        late_after_s=late_after_s,
        lag_s=lag_stats(totals.lags),
        skipped_by_reason=dict(totals.reasons),
        problem_jobs=totals.problems[:100],
        quarantined=totals.quarantined[:100],
        unplannable=totals.unplannable[:100],
        executions={str(e): n for e, n in sorted(totals.executions.items())},
        stranded_runs=totals.stranded,
        events=events,
    )


def _events(dep: Deployment, now_ms: int) -> Op:
    """Events received, pending and unsettled (pending past UNSETTLED_AFTER_S), summed
    over the shards."""
    old = now_ms - UNSETTLED_AFTER_S * 1000
    calls = []
    for s in range(dep.n_shards):
        sk = dep.shard(s)
        calls += [
            Call(("ZCARD", sk.event_log)),
            Call(("ZCARD", sk.events_pending)),
            Call(("ZCOUNT", sk.events_pending, "-inf", f"({old}")),
        ]
    replies = [int(check(r)) for r in (yield calls)]
    return {
        "received": sum(replies[0::3]),
        "pending": sum(replies[1::3]),
        "unsettled": sum(replies[2::3]),
    }


def _add_job(
    totals: _Totals,
    history: JobHistory,
    horizon: int,
    lag_from: datetime | None,
    reference: bool = False,
) -> None:
    records = account(history, horizon, reference=reference)
    counts = Counter(r.outcome.value for r in records)
    totals.counts.update(counts)
    for r in records:
        if r.outcome == Outcome.FIRED and r.run_id is not None:
            totals.fired_rids.append(r.run_id)
        if r.outcome == Outcome.FIRED and r.lag_s is not None:
            if lag_from is None or r.tick >= lag_from:
                totals.lags.append(r.lag_s)
        elif r.outcome == Outcome.SKIPPED and r.reason:
            totals.reasons[r.reason] += 1
    expected = {r.tick for r in records}
    totals.unexpected += sum(
        1
        for tick, runs in history.runs.items()
        if tick <= horizon and from_ms(tick) not in expected and not all(r[2] for r in runs)
    )
    problems = [r for r in records if r.outcome in (Outcome.MISSING, Outcome.DUPLICATED)]
    if problems:
        totals.problems.append(JobAudit(history.job_id, dict(counts), problems[:20]))


def job_ticks(dep: Deployment, job_id: str, lo: int | None, hi: int | None, limit: int) -> Op:
    """The ticks of one job in a window (default: since creation until now)."""
    (now,) = yield [Call(("TIME",))]
    now_ms = server_ms(now)
    history = yield from load_history(dep, job_id)
    records = account(history, now_ms, lo or 0, hi, limit)
    shown = records[:limit]
    if not is_dag_id(job_id):
        yield from _run_outcomes(dep, history, shown)
    return TickList(job_id, shown, truncated=len(records) > limit)


def _run_outcomes(dep: Deployment, history: JobHistory, records: list[TickRecord]) -> Op:
    """Each fired tick's run as it ended or stands: the state of its last attempt (a run
    left for the archive: its archived state) and how many attempts it took."""
    fired = [r.run_id for r in records if r.run_id is not None]
    lasts = yield from last_attempts(dep, fired)
    for record in records:
        if record.run_id is None or record.run_id not in lasts:
            continue
        last, state = lasts[record.run_id]
        if not state and last in history.archived:
            state = history.archived[last][0]
        record.run_state = state or None
        record.attempts = attempt_of(last)
        record.last_run_id = last
