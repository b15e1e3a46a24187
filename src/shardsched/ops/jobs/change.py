"""A job's definition changed: patched (a subset of its fields, or its status), or
written whole as its next version; and the definition a job was registered with, read
back from the job. Written as :mod:`shardsched.store.calls` generators, like
:mod:`.define`."""

from __future__ import annotations

from datetime import datetime

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.app_sets import check_hand_change, check_owner
from shardsched.core.concurrency import key_or_none
from shardsched.core.errors import (
    ConflictError,
    DagTaskJob,
    JobDeleted,
    PreconditionFailed,
    ShardschedError,
    ValidationError,
)
from shardsched.core.instants import to_ms
from shardsched.core.models import JobSpec, JobStatus
from shardsched.core.patches import JobPatch
from shardsched.core.queues import stored as stored_queue
from shardsched.core.sameness import same_definition
from shardsched.core.schedule import first_planned_ms
from shardsched.core.timing import timing_of
from shardsched.core.validation import checked, validate_spec
from shardsched.core.views import Job
from shardsched.ops import triggers as after
from shardsched.ops.jobs.read import read_job
from shardsched.ops.schedules.calendars import require_calendars
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import jobs as lua

_spec_encoder = msgspec.json.Encoder()
_spec_decoder = msgspec.json.Decoder(JobSpec)


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


_SPEC_FIELDS = tuple(f for f in JobSpec.__struct_fields__ if f not in ("id", "trigger_rule"))


def spec_of(job: Job) -> JobSpec:
    """The definition a job was registered (or last changed) with."""
    return JobSpec(**{f: getattr(job, f) for f in _SPEC_FIELDS})


def patch_job(
    dep: Deployment,
    job_id: str,
    patch: JobPatch,
    actor: str = SDK_ACTOR,
    if_match: int | None = None,
) -> Op:
    """Change a job's definition or status; returns the updated Job.

    A new schedule, or a resume, re-scores the timer from the server's clock now; pause
    removes the timer entry. Concurrent patches are serialised by the job's version;
    ``if_match``: refuse (PreconditionFailed) unless the job is at that version.
    """
    checked(patch)
    if patch.status == JobStatus.DELETED:
        raise ValidationError("use DELETE to delete a job", "$.status")
    for _attempt in range(16):
        job = yield from changeable_job(dep, job_id, if_match)
        if job.invalid is not None:  # a patch would write the repaired values back unseen
            raise ConflictError(
                f"job {job_id!r} was stored by an older version and fails a check now "
                f"({job.invalid}): replace it whole (PUT) or delete it"
            )
        not_spec = ("status", "pause_reason", "paused_until")
        changes = {f: getattr(patch, f) for f in patch.__struct_fields__ if f not in not_spec}
        changes = {f: v for f, v in changes.items() if v is not None}
        if patch.labels is not None:
            check_owner(job.labels, patch.labels)
        if changes:  # a status alone (pause, resume) stays open on an app's job
            check_hand_change(job.labels, job_id)
        spec = msgspec.structs.replace(spec_of(job), **changes)
        validate_spec(spec)
        yield from require_calendars(dep, [patch.calendars])
        status = JobStatus(patch.status) if patch.status else job.status  # SDK: a str too
        reason: str | None = None
        until: datetime | None = None
        if status == JobStatus.PAUSED:  # a paused job keeps what the patch does not change
            was = job.status == JobStatus.PAUSED
            reason = patch.pause_reason or (job.pause_reason if was else None)
            until = patch.paused_until or (job.paused_until if was else None)
        else:
            for name in ("pause_reason", "paused_until"):
                if getattr(patch, name) is not None:
                    raise ValidationError(f"{name} only goes with status paused", f"$.{name}")
        written = yield from write_spec(
            dep, job, spec, status, reason, until, "schedule" in changes, actor
        )
        if written is not None:
            return written
        # the version moved meanwhile: read it again (with if_match that read refuses)
    raise ShardschedError(f"job {job_id!r} is being changed concurrently; try again")


def changeable_job(dep: Deployment, job_id: str, if_match: int | None) -> Op:
    """The job, if it may be changed: not a DAG's task, not deleted, at ``if_match``."""
    job = yield from read_job(dep, job_id)
    if job.dag_id is not None:
        raise DagTaskJob(job_id, job.dag_id)
    if job.status == JobStatus.DELETED:
        raise JobDeleted(job_id)
    if if_match is not None and job.version != if_match:
        raise PreconditionFailed(job_id, if_match, job.version)
    return job


def write_spec(
    dep: Deployment,
    job: Job,
    spec: JobSpec,
    status: JobStatus,
    reason: str | None,
    until: datetime | None,
    replan: bool,
    actor: str,
) -> Op:
    """:func:`_write_spec`, holding the lock of ``after`` chains when the job runs after
    another (ops/triggers.py)."""
    op = _write_spec(dep, job, spec, status, reason, until, replan, actor)
    if any(r.after for r in spec.on):
        return (yield from after.locked(dep, op))
    return (yield from op)


def _write_spec(
    dep: Deployment,
    job: Job,
    spec: JobSpec,
    status: JobStatus,
    reason: str | None,
    until: datetime | None,
    replan: bool,
    actor: str,
) -> Op:
    """Write a validated definition and status over ``job`` as its next version, unless
    nothing differs (then ``job`` itself); None when the job's version moved meanwhile.

    ``replan``: the schedule was given anew, so the next fire is computed from now."""
    spec = _spec_decoder.decode(_spec_encoder.encode(spec))  # as stored: 60 reads 60.0
    if (
        status == job.status
        and same_definition(spec, spec_of(job))
        and (status != JobStatus.PAUSED or (reason, until) == (job.pause_reason, job.paused_until))
    ):
        return job  # nothing changes (a repeated pause or resume): no new version
    listens = {rule.event for rule in spec.on if rule.event is not None}
    if listens:  # the index first: it holds every listener, and maybe more
        yield [Call(("SADD", dep.globals.listeners(e), job.job_id)) for e in sorted(listens)]
    ups = after.upstreams(spec.on)
    if ups:  # each exists (or the chain is refused) and is marked before the write
        yield from after.check_chain(
            dep, {job.job_id: spec.on}, labels_of={job.job_id: spec.labels}
        )
        yield after.marks(dep, job.job_id, ups)
        yield from after.mark_selected(dep, job.job_id, [u for u in ups if after.is_selector(u)])
    (now, selected) = yield [Call(("TIME",)), Call(("SMEMBERS", dep.globals.selectors))]
    now_ms = server_ms(now)
    timing = _spec_encoder.encode(timing_of(spec, job.job_id))
    roll = status != job.status or timing != _spec_encoder.encode(
        timing_of(spec_of(job), job.job_id)
    )
    next_fire: int | str
    if status == JobStatus.PAUSED:
        next_fire = ""
    elif (
        replan
        or job.status == JobStatus.PAUSED
        or (spec.spread_s, spec.starts_at, spec.ends_at, spec.max_fires)
        != (job.spread_s, job.starts_at, job.ends_at, job.max_fires)
    ):
        # (a new spread moves the offset its timer score was planned with)
        first = first_planned_ms(timing_of(spec, job.job_id), job.job_id, now_ms)
        fired = (job.max_fires or 0) - (job.fires_left or 0)  # fires counted (with max_fires)
        spent = spec.max_fires is not None and fired >= spec.max_fires
        next_fire = "" if first is None or spent else first
    else:
        next_fire = "="
    (reply,) = yield [
        lua.update_job(
            dep.keys_for(job.job_id),
            dep.globals,
            job.job_id,
            version=job.version,
            spec_json=_spec_encoder.encode(spec),
            timing_json=timing,
            status=status.value,
            next_fire=next_fire,
            lease_ms=round(spec.lease_s * 1000),
            roll=roll,
            pause_reason=reason or "",
            paused_until_ms=None if until is None else to_ms(until),
            auto_pause_after=spec.auto_pause_after,
            actor=actor,
            change=_change_of(job.status, status),
            detail=reason or "",
            queue=stored_queue(
                spec.queue, spec.priority, key_or_none(spec.concurrency_key, spec.labels)
            ),
            rename=(job.name, spec.name),
            deadman_ms=_ms(spec.expect_success_within_s),
        )
    ]
    code = check(reply)[0]
    lua.raise_refusal(code, job.job_id)
    if code != lua.JobReply.OK:
        return None
    gone = {rule.event for rule in job.on if rule.event is not None} - listens
    if gone:  # no longer listens: out of the index (a delivery would trim it anyway)
        yield [Call(("SREM", dep.globals.listeners(e), job.job_id)) for e in sorted(gone)]
    left = sorted(set(after.upstreams(job.on)) - set(ups))
    if left:
        yield after.unmarks(dep, job.job_id, left)
    if spec.labels:  # a selector may name it now
        yield from after.join_selectors(dep, selected, [(job.job_id, spec.labels)])
    return (yield from read_job(dep, job.job_id))


def _change_of(was: JobStatus, now: JobStatus) -> str:
    """The change log's name for a PATCH: pause, resume, or update."""
    if now != was:
        return "pause" if now == JobStatus.PAUSED else "resume"
    return "update"
