"""The SDK's plans of a job's history and time: its versions and change logs, its ticks
counted (``job_stats``), a backfill (gap-aware with ``only``), and a schedule's preview.
Each is an I/O-free :class:`Plan` the sync and async clients drive (sdk/sync.py,
sdk/aio.py), as sdk/plans.py's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shardsched import ops
from shardsched.core.backfill import BackfillRequest, Gap, ResumeRequest
from shardsched.core.calendars import CalendarRule
from shardsched.core.errors import ValidationError
from shardsched.core.instants import to_ms
from shardsched.core.models import OnResume, Schedule, SchedulePreviewRequest
from shardsched.core.queues import Priority
from shardsched.core.time_views import BackfillResult, JobStats, ResumeResult
from shardsched.core.views import ChangeList, EventList, JobVersions, SchedulePreview
from shardsched.ops.history import changes
from shardsched.ops.history.stats import job_stats as job_stats_op
from shardsched.ops.jobs.resume import resume_job as resume_op
from shardsched.ops.runs.events import events_page
from shardsched.ops.schedules.preview import preview_with_calendars
from shardsched.sdk.plans import Handle, Plan


def job_stats(
    c: Handle, job_id: str, since: datetime | None = None, until: datetime | None = None
) -> Plan[JobStats]:
    """The job's (or DAG's) ticks over [since, until] (default the last day) counted:
    fired, late, skipped by reason, missed, and its effective cadence."""
    lo = None if since is None else to_ms(since)
    hi = None if until is None else to_ms(until)
    return Plan(job_stats_op(c.deployment, job_id, lo, hi))


def job_versions(c: Handle, job_id: str) -> Plan[JobVersions]:
    return Plan(ops.job_versions(c.deployment, job_id))


def job_changes(
    c: Handle, job_id: str, limit: int = 50, cursor: str | None = None
) -> Plan[ChangeList]:
    """Who changed the job, how and when, newest first (``next_cursor`` for more)."""
    return Plan(changes.job_changes(c.deployment, job_id, limit, cursor))


def list_events(
    c: Handle,
    job_id: str | None = None,
    run_id: str | None = None,
    state: str | None = None,
    limit: int = 100,
    after: str | None = None,
    since: datetime | None = None,
) -> Plan[EventList]:
    """The shards' events (what ``GET /events`` answers), oldest first from the cursor
    ``after`` (or ``since``, or the oldest kept), filtered by job, run and new state;
    ``next_cursor`` is where to continue, also when caught up."""
    since_ms = None if since is None else to_ms(since)
    return Plan(events_page(c.deployment, limit, after, since_ms, job_id, run_id, state))


def dag_changes(
    c: Handle, dag_id: str, limit: int = 50, cursor: str | None = None
) -> Plan[ChangeList]:
    return Plan(changes.dag_changes(c.deployment, dag_id, limit, cursor))


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


def next_fire_times(
    c: Handle,
    schedule: Schedule,
    count: int = 10,
    after: datetime | None = None,
    job_id: str = "",
    spread_s: float = 0.0,
    *,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    max_fires: int | None = None,
    calendars: CalendarRule | None = None,
) -> Plan[SchedulePreview]:
    """The schedule's next fire times (UTC and its wall clock), DST moves flagged; its
    ``H`` fields and its ticks' planned times as for ``job_id`` with ``spread_s``; a
    job's window, ``max_fires`` and named calendars in effect (``stops`` says why the
    list ends short, ``suppressed`` each tick a calendar skips)."""
    request = SchedulePreviewRequest(
        schedule=schedule,
        count=count,
        after=after,
        job_id=job_id,
        spread_s=spread_s,
        starts_at=starts_at,
        ends_at=ends_at,
        max_fires=max_fires,
        calendars=calendars,
    )
    return Plan(preview_with_calendars(c.deployment, request))


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
