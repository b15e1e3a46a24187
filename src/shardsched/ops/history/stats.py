"""A job's accounting over a window, read from its ledger (the audit's own accounting,
ops/history/ledger.py): how many of its ticks fired, fired late, were skipped (by reason) or lost,
and the cadence it actually ran at beside the one it is configured for, so "configured
every 20 s, effective every 60 s: 40 skipped by overlap" is one request away."""

from __future__ import annotations

from shardsched.core.durations import duration_text
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule
from shardsched.core.time_views import JobStats
from shardsched.ops.history.ledger import JobHistory, Outcome, TickRecord, account, load_history
from shardsched.store.calls import Call, Op, server_ms
from shardsched.store.deployment import Deployment

#: The window when none is asked: the last day.
DEFAULT_WINDOW_MS = 86_400_000


def job_stats(dep: Deployment, job_id: str, lo: int | None, hi: int | None) -> Op:
    """The job's (or DAG's) ticks in [lo, hi] (default: the last day, until now) counted."""
    (now,) = yield [Call(("TIME",))]
    now_ms = server_ms(now)
    hi = now_ms if hi is None else min(hi, now_ms)
    lo = hi - DEFAULT_WINDOW_MS if lo is None else lo
    history = yield from load_history(dep, job_id)
    records = account(history, now_ms, lo, hi)
    grace_s = history.segments[-1].timing.misfire_grace_s if history.segments else 60.0
    counts = dict.fromkeys(Outcome, 0)
    skipped: dict[str, int] = {}
    late = 0
    for r in records:
        counts[r.outcome] += 1
        if r.outcome == Outcome.SKIPPED:
            reason = r.reason or "unknown"
            skipped[reason] = skipped.get(reason, 0) + 1
        elif r.outcome == Outcome.FIRED and r.lag_s is not None and r.lag_s > grace_s:
            late += 1
    ticks = len(records)
    fired = counts[Outcome.FIRED]
    configured = _configured(history, records)
    effective = _spacing([r.tick.timestamp() for r in records if r.outcome == Outcome.FIRED])
    return JobStats(
        job_id=job_id,
        since=from_ms(lo),
        until=from_ms(hi),
        ticks=ticks,
        fired=fired,
        late=late,
        skipped=skipped,
        missed=counts[Outcome.MISSING],
        pending=counts[Outcome.PENDING],
        duplicated=counts[Outcome.DUPLICATED],
        configured_every_s=None if configured is None else round(configured, 3),
        effective_every_s=None if effective is None else round(effective, 3),
        summary=_summary(configured, effective, skipped, counts[Outcome.MISSING], late),
    )


def _configured(history: JobHistory, records: list[TickRecord]) -> float | None:
    """The cadence the job is configured for now: its current schedule's (an interval's
    every_s; else the spacing of the ticks since its last change), not a mean over the
    ticks of every version in the window (30 s edited to 45 s is "every 45s")."""
    if not history.segments:
        return _spacing([r.tick.timestamp() for r in records])
    current = history.segments[-1]
    schedule = current.timing.schedule
    if isinstance(schedule, IntervalSchedule):
        return schedule.every_s
    since = from_ms(current.first)
    ticks = [r.tick.timestamp() for r in records if r.tick >= since]
    return _spacing(ticks) or _spacing([r.tick.timestamp() for r in records])


def _spacing(instants: list[float]) -> float | None:
    """The mean time between successive instants (None for fewer than two)."""
    return (instants[-1] - instants[0]) / (len(instants) - 1) if len(instants) > 1 else None


def _summary(
    configured: float | None,
    effective: float | None,
    skipped: dict[str, int],
    missed: int,
    late: int,
) -> str:
    if configured is None:
        return "fewer than two ticks in the window"
    text = f"configured every {_every(configured)}"
    text += f", effective every {_every(effective)}" if effective else ", fewer than two fired"
    why = [f"{n} skipped by {reason}" for reason, n in sorted(skipped.items())]
    why += [f"{missed} missed"] if missed else []
    why += [f"{late} late"] if late else []
    return text + (": " + ", ".join(why) if why else "")


def _every(seconds: float) -> str:
    return duration_text(round(seconds) if seconds >= 10 else round(seconds, 1))
