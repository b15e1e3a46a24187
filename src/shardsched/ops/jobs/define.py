"""Job operations: register, read, change, pause, trigger, delete, backfill; runs by id.

Written once as :mod:`shardsched.store.calls` generators, so the router, the SDK and the
CLI drive the same code over their own clients.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.app_sets import check_hand_change, check_owner
from shardsched.core.concurrency import key_or_none
from shardsched.core.errors import (
    ConflictError,
    DagTaskJob,
    IdTaken,
    JobDeleted,
    PreconditionFailed,
    ShardschedError,
    ValidationError,
)
from shardsched.core.field_errors import field_error, within
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.labels import ACCOUNT_LABEL
from shardsched.core.models import JobSpec, JobStatus, TaskSpec, Timing
from shardsched.core.patches import JobPatch
from shardsched.core.queues import stored as stored_queue
from shardsched.core.sameness import same_definition
from shardsched.core.schedule import FirstFires, first_planned_ms
from shardsched.core.timing import per_job, timing_of
from shardsched.core.validation import checked, validate_spec
from shardsched.core.views import Job, JobCreated
from shardsched.ops import triggers as after
from shardsched.ops.dags.manage import join_dag
from shardsched.ops.jobs.read import read_job
from shardsched.ops.schedules.calendars import require_calendars
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import jobs as lua

_spec_encoder = msgspec.json.Encoder()
_spec_decoder = msgspec.json.Decoder(JobSpec)
_task_decoder = msgspec.json.Decoder(TaskSpec)
_timing_decoder = msgspec.json.Decoder(Timing)


def validate_specs(specs: Sequence[JobSpec]) -> None:
    """Validate every spec; a bad one raises ValidationError with its field as
    ``$[i].field`` when there are several."""
    ids: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.id is not None:
            if spec.id in ids:
                raise ValidationError(f"id {spec.id!r} is given twice", f"$[{i}].id")
            ids.add(spec.id)
        try:
            validate_spec(spec)
        except msgspec.ValidationError as exc:
            err = field_error(exc, msgspec.to_builtins(spec), JobSpec)
            raise (err if len(specs) == 1 else within(err, i)) from None


def create_jobs(
    dep: Deployment,
    specs: Sequence[JobSpec],
    validated: bool = False,
    actor: str = SDK_ACTOR,
    writer: str = "",
    held: bool = False,
) -> Op:
    """Register jobs (validated first: an invalid one writes nothing); returns JobCreated list.
    ``held``: with no timer entry (a job to be paused next: no tick can fire before).

    One script call per shard, all in one round trip. A job with depends_on joins its
    dependencies' DAG as a new task (one script call each). ``validated``: the caller
    already ran :func:`validate_specs` on them (a bulk registration, before its first batch).
    ``writer``: the app set a deploy writes as ('' by hand: core/apps.check_owner).
    """
    if not validated:
        validate_specs(specs)
    for spec in specs:
        check_owner(None, spec.labels, writer)
    yield from require_calendars(dep, [s.calendars for s in specs if s.calendars])
    if any(spec.depends_on for spec in specs):
        created = []
        for spec in specs:
            if spec.depends_on:
                created.append((yield from join_dag(dep, spec, actor)))
            else:
                created += yield from create_jobs(dep, [spec], actor=actor)
        return created
    chained = {  # a job whose id is made here cannot be anyone's upstream yet
        spec.id or f"(new job {i})": spec.on
        for i, spec in enumerate(specs)
        if any(r.after for r in spec.on)
    }
    before: list[str] = []
    after_write: list[str] = []
    if chained:
        batch = frozenset(spec.id for spec in specs if spec.id)
        before, after_write = yield from after.check_chain(dep, chained, batch)
    (now,) = yield [Call(("TIME",))]
    now_ms = server_ms(now)
    firsts = FirstFires(now_ms)  # one cron computation per distinct timing
    timings: dict[tuple[Any, ...], tuple[bytes, Timing]] = {}
    by_shard: dict[int, list[lua.NewJob]] = {}
    plan = []
    has_h: dict[bytes, bool] = {}  # per schedule: whether it has an H of its own per job
    listening: dict[str, list[str]] = {}  # event -> its listeners among them
    runs_after: list[tuple[str, list[str]]] = []  # a job, the upstreams it runs after
    fresh = iter(k.new_job_ids(sum(not spec.id for spec in specs)))
    for spec in specs:
        job_id = spec.id or next(fresh)
        if spec.id is not None:  # the id is the job's key, not part of its definition
            spec = msgspec.structs.replace(spec, id=None)
        assert spec.schedule is not None  # validated: a job of its own has one
        schedule = _spec_encoder.encode(spec.schedule)
        h = has_h.get(schedule)
        if h is None:
            h = has_h[schedule] = per_job(spec.schedule)
        timing_key = (  # every field timing_of reads: jobs alike share one timing
            schedule,
            spec.catchup,
            spec.misfire_grace_s,
            spec.overlap,
            spec.max_catchup,
            spec.spread_s,
            spec.starts_at,
            spec.ends_at,
            spec.max_fires,
            spec.start_deadline_s,
            spec.finish_deadline_s,
            spec.skip_late_start,
            None if spec.calendars is None else _spec_encoder.encode(spec.calendars),
            spec.labels.get(ACCOUNT_LABEL, ""),
            spec.catchup_per_minute,
            None if spec.backlog is None else spec.backlog.code(),
            job_id if h else "",  # its H is its own
        )
        known = timings.get(timing_key)
        if known is None:
            made = timing_of(spec, job_id)
            known = timings[timing_key] = (_spec_encoder.encode(made), made)
        timing = known[0]
        first = None if held else firsts.of(timing, known[1], job_id)
        plan.append((job_id, first))
        for rule in spec.on:
            if rule.event is not None:
                listening.setdefault(rule.event, []).append(job_id)
        ups = after.upstreams(spec.on)
        if ups:
            runs_after.append((job_id, ups))
        by_shard.setdefault(k.shard_of(job_id, dep.n_shards), []).append(
            lua.NewJob(
                job_id,
                _spec_encoder.encode(spec),
                timing,
                first,
                round(spec.lease_s * 1000),
                spec.auto_pause_after,
                stored_queue(
                    spec.queue, spec.priority, key_or_none(spec.concurrency_key, spec.labels)
                ),
                spec.name,
                _ms(spec.expect_success_within_s),
            )
        )
    if listening:  # the index first: it holds every listener, and maybe more
        yield [Call(("SADD", dep.globals.listeners(e), *ids)) for e, ids in listening.items()]
    if runs_after:  # upstreams that exist: marked first, so none of their ends is missed
        existing_ups = set(before)
        calls = [
            c
            for j, ups in runs_after
            for c in after.marks(dep, j, [u for u in ups if u in existing_ups])
        ]
        if calls:
            yield calls
    shards = list(by_shard)
    replies = yield [
        lua.register_job(dep.shard(s), dep.globals, by_shard[s], actor) for s in shards
    ]
    registered: dict[str, lua.Registered] = {}
    for s, reply in zip(shards, replies, strict=True):
        for new, code in zip(by_shard[s], lua.decode_registered(check(reply)), strict=True):
            registered[new.job_id] = code
    if runs_after and after_write:  # upstreams made in this very batch: marked now
        fresh_ups = set(after_write)
        yield [
            c
            for j, ups in runs_after
            for c in after.marks(dep, j, [u for u in ups if u in fresh_ups])
        ]
    created = []
    first_at: dict[int, datetime] = {}  # one datetime per distinct instant
    for job_id, first in plan:
        code = registered[job_id]
        if code == lua.Registered.TAKEN:  # chosen, or a 48-bit random id collided
            raise IdTaken(job_id)
        at = None if first is None else first_at.get(first)
        if first is not None and at is None:
            at = first_at[first] = from_ms(first)
        again = code == lua.Registered.RECREATED
        created.append(JobCreated(job_id=job_id, next_run_at=at, recreated=again))
    return created


def create_job(dep: Deployment, spec: JobSpec, actor: str = SDK_ACTOR) -> Op:
    (created,) = yield from create_jobs(dep, [spec], actor=actor)
    return created


#: What a job's view carries of its definition: every field of the spec but its id (not
#: part of the definition) and the trigger rule (a DAG task's: the view's may be None).
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
        yield from after.check_chain(dep, {job.job_id: spec.on})
        yield after.marks(dep, job.job_id, ups)
    (now,) = yield [Call(("TIME",))]
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
    return (yield from read_job(dep, job.job_id))


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def _change_of(was: JobStatus, now: JobStatus) -> str:
    """The change log's name for a PATCH: pause, resume, or update."""
    if now != was:
        return "pause" if now == JobStatus.PAUSED else "resume"
    return "update"
