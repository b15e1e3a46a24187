"""Plans on a schedule's ticks: their counts over a window, backfill of a window, a
resume that chooses what the ticks of the pause do, and a job's upcoming fires."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shardsched import ops
from shardsched.core.backfill import BackfillRequest, Gap, ResumeRequest
from shardsched.core.errors import ValidationError
from shardsched.core.instants import given_ms
from shardsched.core.models import (
    OnResume,
)
from shardsched.core.queues import Priority
from shardsched.core.time_views import BackfillResult, JobStats, JobUpcoming, ResumeResult
from shardsched.ops.history.stats import job_stats as job_stats_op
from shardsched.ops.jobs.resume import resume_job as resume_op
from shardsched.ops.jobs.upcoming import upcoming_fires as upcoming_op
from shardsched.sdk.plans import (
    Handle,
    Plan,
)


def job_stats(
    c: Handle, job_id: str, since: datetime | None = None, until: datetime | None = None
) -> Plan[JobStats]:
    """The job's (or DAG's) ticks over [since, until] (default the last day) counted:
    fired, late, skipped by reason, missed, and its effective cadence."""
    lo = None if since is None else given_ms(since, "$.since")
    hi = None if until is None else given_ms(until, "$.until")
    return Plan(job_stats_op(c.deployment, job_id, lo, hi))


def upcoming_fires(c: Handle, job_id: str, count: int = 10) -> Plan[JobUpcoming]:
    """The job's next ``count`` fires as it will fire them: from its next tick, with its
    window, fires left, calendars and pause in effect (none while paused)."""
    return Plan(upcoming_op(c.deployment, job_id, count))


def backfill(
    c: Handle,
    job_id: str,
    since: datetime,
    until: datetime,
    max_concurrent: int = 1,
    priority: Priority | str = Priority.LOW,
    only: Sequence[str] | None = None,
    dry_run: bool = False,
    per_minute: int | None = None,
) -> Plan[BackfillResult]:
    """Run every nominal tick of [since, until] that has no run yet (at a low priority
    unless asked: a backfill never delays scheduled runs); ``only``: just the ticks the
    ledger shows ``missing``, ``skipped`` or ``failed`` (run again as a new attempt);
    ``dry_run``: list them, run nothing; ``per_minute``: at most that many start a minute."""
    if priority not in set(Priority):
        raise ValidationError(f"priority is high, normal or low, not {priority!r}", "$.priority")
    gaps = None if only is None else [_gap(g) for g in only]
    request = BackfillRequest(
        since=since,
        until=until,
        max_concurrent=max_concurrent,
        priority=Priority(priority),
        only=gaps,
        dry_run=dry_run,
        per_minute=per_minute,
    )
    return Plan(ops.backfill(c.deployment, job_id, request, c.actor))


def _gap(name: str) -> Gap:
    if name not in set(Gap):
        raise ValidationError(f"only takes missing, skipped or failed, not {name!r}", "$.only")
    return Gap(name)


def resume_job(
    c: Handle,
    job_id: str,
    catchup: str | None = None,
    dry_run: bool = False,
    max_concurrent: int = 1,
    per_minute: int | None = None,
) -> Plan[ResumeResult]:
    """Resume a paused job, running the ticks its pause went over as ``catchup`` says
    (skip, latest, all, paced: at most ``per_minute`` a minute; default the job's
    ``on_resume``); ``dry_run`` lists them."""
    if catchup is not None and catchup not in set(OnResume):
        raise ValidationError(
            f"catchup is skip, latest, all or paced, not {catchup!r}", "$.catchup"
        )
    choice = None if catchup is None else OnResume(catchup)
    request = ResumeRequest(
        catchup=choice, dry_run=dry_run, max_concurrent=max_concurrent, per_minute=per_minute
    )
    return Plan(resume_op(c.deployment, job_id, request, c.actor))
