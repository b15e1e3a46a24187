"""Resuming a paused job with a choice about the ticks its pause went over: ``skip``
(fire from now on: what a plain resume does), ``latest`` (the latest of them, now) or
``all`` (the newest ``max_catchup`` of them, paced ``max_concurrent`` at a time as a
backfill is, at normal priority, beside on-time work) or ``paced`` (as ``all``, and at
most ``per_minute`` started a minute, by the owner's pacer); the job's ``on_resume`` unless the
request says. A dry run lists the ticks and changes nothing. The ticks run under the
scheduler's own run ids (``<job>:<tick>:1``), so asking twice runs none of them twice."""

from __future__ import annotations

from collections import deque
from itertools import islice

from shardsched.core.access import SDK_ACTOR
from shardsched.core.backfill import DEFAULT_PER_MINUTE, BackfillRequest, ResumeRequest
from shardsched.core.calendars import tick_allowed
from shardsched.core.errors import ConflictError, DagTaskJob, JobDeleted
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.models import JobStatus, OnResume, schedule_zone
from shardsched.core.patches import JobPatch
from shardsched.core.queues import Priority
from shardsched.core.ticks import ticks_in
from shardsched.core.time_views import ResumeResult
from shardsched.core.timing import resolved
from shardsched.core.validation import checked
from shardsched.ops.jobs.change import patch_job
from shardsched.ops.jobs.read import read_job
from shardsched.ops.jobs.versions import backfill, job_anchor
from shardsched.store.calendars import read_book
from shardsched.store.calls import Call, Op, server_ms
from shardsched.store.deployment import Deployment

#: Most ticks walked to find the newest ones a long pause owes.
MAX_WALK = 1_000_000


def resume_job(dep: Deployment, job_id: str, request: ResumeRequest, actor: str = SDK_ACTOR) -> Op:
    """Resume a paused job and run the ticks of its pause as chosen; returns ResumeResult."""
    checked(request)
    job = yield from read_job(dep, job_id)
    if job.dag_id is not None:
        raise DagTaskJob(job_id, job.dag_id)
    if job.status == JobStatus.DELETED:
        raise JobDeleted(job_id)
    if job.status != JobStatus.PAUSED:
        raise ConflictError(f"job {job_id!r} is {job.status.value}: only a paused job resumes")
    choice = request.catchup or job.on_resume
    (now,) = yield [Call(("TIME",))]
    owed: list[int] = []
    if choice != OnResume.SKIP and job.paused_at is not None:
        anchor = yield from job_anchor(dep, job)
        walked = ticks_in(
            resolved(job.schedule, job_id), anchor, to_ms(job.paused_at), server_ms(now)
        )
        rule = job.calendars if job.calendars and job.calendars.names() else None
        if rule is not None:  # only the ticks its calendars allow are owed
            book = yield from read_book(dep)
            zone = schedule_zone(job.schedule)
            walked = (t for t in walked if tick_allowed(rule, book, t, zone))
        keep = 1 if choice == OnResume.LATEST else job.max_catchup
        owed = list(deque(islice(walked, MAX_WALK), maxlen=keep))
    if request.dry_run:
        return ResumeResult(job_id, choice, [from_ms(t) for t in owed], True)
    resumed = yield from patch_job(dep, job_id, JobPatch(status=JobStatus.ACTIVE), actor)
    queued = 0
    if owed:
        paced = choice == OnResume.PACED
        window = BackfillRequest(
            since=from_ms(owed[0]),
            until=from_ms(owed[-1]),
            max_concurrent=request.max_concurrent,
            priority=Priority.NORMAL,
            per_minute=(request.per_minute or job.catchup_per_minute or DEFAULT_PER_MINUTE)
            if paced
            else None,
        )
        queued = (yield from backfill(dep, job_id, window, actor)).queued
    return ResumeResult(job_id, choice, [from_ms(t) for t in owed], False, resumed, queued)
