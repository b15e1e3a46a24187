"""A job's upcoming fires, from the job itself: its next tick as its owner holds it (an
interval's phase, a spread offset), then its schedule walked on with the job's limits in
effect (``starts_at``, ``ends_at``, the fires it has left, its calendars) and its pause
(none while paused; from its resume on while paused until a time). The console's job page
and ``shardsched jobs next`` show this one answer, not a bare schedule previewed from now.
"""

from __future__ import annotations

from datetime import timedelta

import msgspec

from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import IntervalSchedule, JobStatus, SchedulePreviewRequest
from shardsched.core.preview import preview
from shardsched.core.schedule_words import schedule_words
from shardsched.core.time_views import JobUpcoming
from shardsched.core.views import Job
from shardsched.ops.jobs.read import read_job
from shardsched.store.calendars import read_book
from shardsched.store.calls import Call, Op, server_ms
from shardsched.store.deployment import Deployment


def upcoming_fires(dep: Deployment, job_id: str, count: int = 10) -> Op:
    """The job's next ``count`` fires as it will fire them; returns :class:`JobUpcoming`.
    A DAG's task job answers for its DAG's schedule."""
    job = yield from read_job(dep, job_id)
    (now,) = yield [Call(("TIME",))]
    now_ms = server_ms(now)
    resumes_at = None
    if job.status == JobStatus.DELETED:
        return _none(job, "deleted")
    if job.status == JobStatus.PAUSED:
        if job.paused_until is None:
            return _none(job, "paused")
        resumes_at = max(to_ms(job.paused_until), now_ms)
    if job.no_next_run is not None:
        return _none(job, job.no_next_run)
    if job.fires_left == 0:
        return _none(job, "max_fires")
    schedule = job.schedule
    offset = offset_ms(job.job_id, job.spread_s)
    if resumes_at is not None:  # it fires again from its resume on, as a new phase
        after = resumes_at - offset
        if isinstance(schedule, IntervalSchedule) and schedule.start_at is None:
            start = from_ms(resumes_at) + timedelta(seconds=schedule.every_s)
            schedule = msgspec.structs.replace(schedule, start_at=start)
    elif job.next_run_at is not None:  # its next tick, as its owner holds it
        tick = to_ms(job.next_run_at) - offset
        after = tick - 1
        if isinstance(schedule, IntervalSchedule):  # the tick is the interval's phase
            schedule = msgspec.structs.replace(schedule, start_at=from_ms(tick))
    else:
        return _none(job, "not_planned")
    request = SchedulePreviewRequest(
        schedule=schedule,
        count=count,
        after=from_ms(after),
        job_id=job.job_id,
        spread_s=job.spread_s,
        starts_at=job.starts_at,
        ends_at=job.ends_at,
        max_fires=job.fires_left,
        calendars=job.calendars,
    )
    book = (yield from read_book(dep)) if job.calendars and job.calendars.names() else None
    shown = preview(request, now_ms, book)
    return JobUpcoming(
        job_id=job.job_id,
        status=job.status,
        schedule_words=schedule_words(job.schedule),
        fire_times=shown.fire_times,
        suppressed=shown.suppressed,
        stops=shown.stops,
        resumes_at=None if resumes_at is None else from_ms(resumes_at),
    )


def _none(job: Job, why: str) -> JobUpcoming:
    return JobUpcoming(
        job_id=job.job_id,
        status=job.status,
        schedule_words=schedule_words(job.schedule),
        fire_times=[],
        suppressed=[],
        stops=why,
    )
