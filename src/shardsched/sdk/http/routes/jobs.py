"""Routes of jobs, a job's ticks and history, and schedule previews (:mod:`.` says what
a route is)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from shardsched.core.calendars import CalendarRule
from shardsched.core.errors import DagNotFound, JobNotFound
from shardsched.core.models import JobSpec, JobStatus, Schedule
from shardsched.core.patches import JobPatch
from shardsched.core.queues import Priority
from shardsched.core.time_views import BackfillResult, JobStats, JobUpcoming, ResumeResult
from shardsched.core.validation import check_job_id
from shardsched.core.views import (
    ChangeList,
    EventList,
    Job,
    JobCreated,
    JobList,
    JobVersions,
    SchedulePreview,
    Triggered,
)
from shardsched.ops.jobs import declare
from shardsched.sdk.http.calls import HttpCall, query, segment

V1 = "/api/v1"


def job_path(job_id: str, tail: str = "") -> str:
    return f"{V1}/jobs/{segment(job_id, JobNotFound)}{tail}"


def dag_path(dag_id: str, tail: str = "") -> str:
    return f"{V1}/dags/{segment(dag_id, DagNotFound)}{tail}"


def put_read(decoded: Any, headers: Mapping[str, str]) -> Any:
    """A PUT's answer: the object and what was done (``Shardsched-Outcome``)."""
    return decoded, declare.Outcome(headers.get("shardsched-outcome", "updated"))


def if_match_header(version: int | None) -> dict[str, str]:
    return {} if version is None else {"if-match": f'"{version}"'}


# jobs ------------------------------------------------------------------------------------


def add_job(spec: JobSpec, unique_name: bool = False) -> HttpCall[JobCreated]:
    q = query(unique_name=unique_name or None)
    return HttpCall("POST", f"{V1}/jobs", JobCreated, q, spec)


def put_job(
    job_id: str, spec: JobSpec, if_match: int | None = None
) -> HttpCall[tuple[Job, declare.Outcome]]:
    check_job_id(job_id)  # as the service checks it: ValidationError at $.id
    headers = if_match_header(if_match)
    return HttpCall("PUT", job_path(job_id), Job, {}, spec, put_read, headers=headers)


def get_job(job_id: str) -> HttpCall[Job]:
    return HttpCall("GET", job_path(job_id), Job)


def jobs_named(name: str) -> HttpCall[list[Job]]:
    return HttpCall(
        "GET", f"{V1}/jobs", JobList, query(name=name, limit=500), read=lambda page, _: page.jobs
    )


def list_jobs(
    limit: int = 50,
    cursor: str | None = None,
    status: JobStatus | None = None,
    name_prefix: str | None = None,
    include_deleted: bool = False,
    labels: dict[str, str] | None = None,
) -> HttpCall[JobList]:
    q = query(
        limit=limit,
        cursor=cursor,
        status=status,
        name_prefix=name_prefix,
        include_deleted=include_deleted or None,
        label=labels,
    )
    return HttpCall("GET", f"{V1}/jobs", JobList, q)


def update_job(job_id: str, patch: JobPatch) -> HttpCall[Job]:
    return HttpCall("PATCH", job_path(job_id), Job, body=patch)


def pause(job_id: str, reason: str | None = None, until: datetime | None = None) -> HttpCall[Job]:
    return update_job(
        job_id, JobPatch(status=JobStatus.PAUSED, pause_reason=reason, paused_until=until)
    )


def resume(job_id: str) -> HttpCall[Job]:
    return update_job(job_id, JobPatch(status=JobStatus.ACTIVE))


def delete_job(job_id: str) -> HttpCall[Job]:
    return HttpCall("DELETE", job_path(job_id), Job)


def restore_job(job_id: str) -> HttpCall[Job]:
    return HttpCall("POST", job_path(job_id, "/restore"), Job)


def trigger(
    job_id: str, args: dict[str, Any] | None = None, idempotency_key: str | None = None
) -> HttpCall[Triggered]:
    body = {k: v for k, v in {"args": args, "idempotency_key": idempotency_key}.items() if v}
    once = idempotency_key is not None  # sent twice, the service answers the first run
    return HttpCall("POST", job_path(job_id, "/trigger"), Triggered, body=body, idempotent=once)


def job_versions(job_id: str) -> HttpCall[JobVersions]:
    return HttpCall("GET", job_path(job_id, "/versions"), JobVersions)


def job_stats(
    job_id: str, since: datetime | None = None, until: datetime | None = None
) -> HttpCall[JobStats]:
    return HttpCall("GET", job_path(job_id, "/stats"), JobStats, query(since=since, until=until))


def upcoming_fires(job_id: str, count: int = 10) -> HttpCall[JobUpcoming]:
    return HttpCall("GET", job_path(job_id, "/upcoming"), JobUpcoming, query(count=count))


def resume_job(
    job_id: str,
    catchup: str | None = None,
    dry_run: bool = False,
    max_concurrent: int = 1,
    per_minute: int | None = None,
) -> HttpCall[ResumeResult]:
    body = {"catchup": catchup, "dry_run": dry_run, "max_concurrent": max_concurrent}
    body |= {"per_minute": per_minute} if per_minute is not None else {}
    return HttpCall(
        "POST", job_path(job_id, "/resume"), ResumeResult, body=body, idempotent=dry_run
    )


def job_changes(job_id: str, limit: int = 50, cursor: str | None = None) -> HttpCall[ChangeList]:
    return HttpCall(
        "GET", job_path(job_id, "/changes"), ChangeList, query(limit=limit, cursor=cursor)
    )


def list_events(
    job_id: str | None = None,
    run_id: str | None = None,
    state: str | None = None,
    limit: int = 100,
    after: str | None = None,
    since: datetime | None = None,
) -> HttpCall[EventList]:
    q = query(job_id=job_id, run_id=run_id, state=state, limit=limit, after=after, since=since)
    return HttpCall("GET", f"{V1}/events", EventList, q)


def backfill(
    job_id: str,
    since: datetime,
    until: datetime,
    max_concurrent: int = 1,
    priority: Priority | str = Priority.LOW,
    only: Sequence[str] | None = None,
    dry_run: bool = False,
    per_minute: int | None = None,
) -> HttpCall[BackfillResult]:
    body: dict[str, Any] = {
        "since": since,
        "until": until,
        "max_concurrent": max_concurrent,
        "priority": priority,
        "dry_run": dry_run,
    }
    body |= {"only": list(only)} if only is not None else {}
    body |= {"per_minute": per_minute} if per_minute is not None else {}
    return HttpCall(
        "POST", job_path(job_id, "/backfill"), BackfillResult, body=body, idempotent=dry_run
    )


def next_fire_times(
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
) -> HttpCall[SchedulePreview]:
    given = {
        "schedule": schedule,
        "count": count,
        "after": after,
        "job_id": job_id,
        "spread_s": spread_s,
        "starts_at": starts_at,
        "ends_at": ends_at,
        "max_fires": max_fires,
        "calendars": calendars,
    }
    body = {k: v for k, v in given.items() if v is not None}
    path = f"{V1}/schedules/preview"
    return HttpCall("POST", path, SchedulePreview, body=body, idempotent=True)  # writes nothing
