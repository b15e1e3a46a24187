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
from shardsched.core.concurrency import key_or_none
from shardsched.core.errors import (
    DagTaskJob,
    IdTaken,
    JobDeleted,
    JobNotFound,
    PreconditionFailed,
    ShardschedError,
    ValidationError,
)
from shardsched.core.field_errors import field_error, within
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.models import JobPatch, JobSpec, JobStatus, TaskSpec, Timing
from shardsched.core.queues import stored as stored_queue
from shardsched.core.sameness import same_definition
from shardsched.core.schedule import FirstFires, first_planned_ms
from shardsched.core.timing import per_job, timing_of
from shardsched.core.validation import checked, validate_spec
from shardsched.core.views import Job, JobCreated
from shardsched.ops.dags import join_dag
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import jobs as lua
from shardsched.store.records import JOB_FIELDS, opt_ms, opt_text

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
    dep: Deployment, specs: Sequence[JobSpec], validated: bool = False, actor: str = SDK_ACTOR
) -> Op:
    """Register jobs (validated first: an invalid one writes nothing); returns JobCreated list.

    One script call per shard, all in one round trip. A job with depends_on joins its
    dependencies' DAG as a new task (one script call each). ``validated``: the caller
    already ran :func:`validate_specs` on them (a bulk registration, before its first batch).
    """
    if not validated:
        validate_specs(specs)
    if any(spec.depends_on for spec in specs):
        created = []
        for spec in specs:
            if spec.depends_on:
                created.append((yield from join_dag(dep, spec, actor)))
            else:
                created += yield from create_jobs(dep, [spec], actor=actor)
        return created
    (now,) = yield [Call(("TIME",))]
    now_ms = server_ms(now)
    firsts = FirstFires(now_ms)  # one cron computation per distinct timing
    # Specs built in a loop share one schedule object (alive all batch long, so ids hold).
    timings: dict[tuple[Any, ...], tuple[bytes, Timing]] = {}
    by_shard: dict[int, list[lua.NewJob]] = {}
    plan = []
    for spec in specs:
        job_id = spec.id or k.new_job_id()
        if spec.id is not None:  # the id is the job's key, not part of its definition
            spec = msgspec.structs.replace(spec, id=None)
        assert spec.schedule is not None  # validated: a job of its own has one
        timing_key = (
            id(spec.schedule),
            spec.catchup,
            spec.misfire_grace_s,
            spec.overlap,
            spec.max_catchup,
            spec.spread_s,
            job_id if per_job(spec.schedule) else "",  # its H is its own
        )
        known = timings.get(timing_key)
        if known is None:
            made = timing_of(spec, job_id)
            known = timings[timing_key] = (_spec_encoder.encode(made), made)
        timing = known[0]
        first = firsts.of(timing, known[1], job_id)
        plan.append((job_id, first))
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
            )
        )
    shards = list(by_shard)
    replies = yield [
        lua.register_job(dep.shard(s), dep.globals, by_shard[s], actor) for s in shards
    ]
    registered: dict[str, lua.Registered] = {}
    for s, reply in zip(shards, replies, strict=True):
        for new, code in zip(by_shard[s], lua.decode_registered(check(reply)), strict=True):
            registered[new.job_id] = code
    created = []
    first_at: dict[int, datetime] = {}  # one datetime per distinct instant
    for job_id, first in plan:
        code = registered[job_id]
        if code == lua.Registered.TAKEN:  # chosen, or a 48-bit random id collided
            raise IdTaken(job_id)
        at = None if first is None else first_at.setdefault(first, from_ms(first))
        again = code == lua.Registered.RECREATED
        created.append(JobCreated(job_id=job_id, next_run_at=at, recreated=again))
    return created


def create_job(dep: Deployment, spec: JobSpec, actor: str = SDK_ACTOR) -> Op:
    (created,) = yield from create_jobs(dep, [spec], actor=actor)
    return created


def job_calls(dep: Deployment, job_id: str) -> list[Call]:
    sk = dep.keys_for(job_id)
    return [Call(("HMGET", sk.job(job_id), *JOB_FIELDS)), Call(("ZSCORE", sk.timer, job_id))]


def plain_job(dep: Deployment, job_id: str, fields: list[Any], score: Any) -> Job:
    """A job of its own (not a DAG's task) from its hash fields and timer score."""
    spec_raw, status, created, updated, version, _dag, reason, paused_at, until = fields[:9]
    inc, born, nf, fc = fields[9:13]
    spec = _spec_decoder.decode(spec_raw)
    assert spec.schedule is not None
    return Job(
        job_id=job_id,
        name=spec.name,
        schedule=spec.schedule,
        command=spec.command,
        timeout_s=spec.timeout_s,
        kill_grace_s=spec.kill_grace_s,
        retry_policy=spec.retry_policy,
        depends_on=spec.depends_on,
        catchup=spec.catchup,
        misfire_grace_s=spec.misfire_grace_s,
        overlap=spec.overlap,
        lease_s=spec.lease_s,
        status=JobStatus(status.decode()),
        next_run_at=None if score is None else from_ms(int(float(score))),
        created_at=from_ms(int(created)),
        updated_at=from_ms(int(updated)),
        version=int(version),
        shard=dep.keys_for(job_id).shard,
        auto_pause_after=spec.auto_pause_after,
        max_catchup=spec.max_catchup,
        pause_reason=opt_text(reason),
        paused_at=opt_ms(paused_at),
        paused_until=opt_ms(until),
        env=spec.env,
        retention=spec.retention,
        labels=spec.labels,
        args=spec.args,
        queue=spec.queue,
        priority=spec.priority,
        concurrency_key=spec.concurrency_key,
        concurrency_limit=spec.concurrency_limit,
        spread_s=spec.spread_s,
        no_next_run=_no_next_run(opt_text(nf), spec) if score is None else None,
        starts_at=spec.starts_at,
        ends_at=spec.ends_at,
        max_fires=spec.max_fires,
        fires_left=None if spec.max_fires is None else max(0, spec.max_fires - int(fc or 0)),
        on_resume=spec.on_resume,
        incarnation=int(inc or 1),
        incarnation_started_at=opt_ms(born),
    )


def _no_next_run(nf: str | None, spec: JobSpec) -> str | None:
    """Why an active job has no timer entry, as the job says it."""
    if nf == "exhausted" and spec.ends_at is not None:
        return "window_ended"
    return nf


def read_job(dep: Deployment, job_id: str) -> Op:
    job_fields, score = yield job_calls(dep, job_id)
    fields = check(job_fields)
    if fields[0] is None or k.is_dag_id(job_id):
        raise JobNotFound(job_id)
    if fields[5] is not None:  # 'dag': a DAG's task
        return (yield from _read_task_job(dep, job_id, fields))
    return plain_job(dep, job_id, fields, check(score))


def _read_task_job(dep: Deployment, job_id: str, fields: list[bytes]) -> Op:
    """A DAG task's job: its schedule, status and next fire are its DAG's."""
    spec_raw, _status, created, updated, version, dag = fields[:6]
    dag_id = dag.decode()
    sk = dep.keys_for(dag_id)
    dag_fields, score = yield [
        Call(("HMGET", sk.job(dag_id), "timing", "status")),
        Call(("ZSCORE", sk.timer, dag_id)),
    ]
    timing_raw, dag_status = check(dag_fields)
    timing = _timing_decoder.decode(timing_raw)
    task = _task_decoder.decode(spec_raw)
    score = check(score)
    return Job(
        job_id=job_id,
        name=task.name,
        schedule=timing.schedule,
        command=task.command,
        timeout_s=task.timeout_s,
        kill_grace_s=task.kill_grace_s,
        retry_policy=task.retry_policy,
        depends_on=[k.task_job_id(dag_id, d) for d in task.depends_on],
        catchup=timing.catchup,
        misfire_grace_s=timing.misfire_grace_s,
        overlap=timing.overlap,
        lease_s=task.lease_s,
        status=JobStatus(dag_status.decode()),
        next_run_at=None if score is None else from_ms(int(float(score))),
        created_at=from_ms(int(created)),
        updated_at=from_ms(int(updated)),
        version=int(version),
        shard=sk.shard,
        dag_id=dag_id,
        trigger_rule=task.trigger_rule,
        env=task.env,
        queue=task.queue,
        priority=task.priority,
        concurrency_key=task.concurrency_key,
        concurrency_limit=task.concurrency_limit,
    )


def get_job(dep: Deployment, job_id: str) -> Op:
    return (yield from read_job(dep, job_id))


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
        not_spec = ("status", "pause_reason", "paused_until")
        changes = {f: getattr(patch, f) for f in patch.__struct_fields__ if f not in not_spec}
        changes = {f: v for f, v in changes.items() if v is not None}
        spec = msgspec.structs.replace(spec_of(job), **changes)
        validate_spec(spec)
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
        )
    ]
    code = check(reply)[0]
    lua.raise_refusal(code, job.job_id)
    if code != lua.JobReply.OK:
        return None
    return (yield from read_job(dep, job.job_id))


def _change_of(was: JobStatus, now: JobStatus) -> str:
    """The change log's name for a PATCH: pause, resume, or update."""
    if now != was:
        return "pause" if now == JobStatus.PAUSED else "resume"
    return "update"
