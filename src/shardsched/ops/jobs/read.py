"""Reading a job back: its hash and timer score into the :class:`Job` the surfaces show
(a DAG task's job takes its schedule, status and next fire from its DAG)."""

from __future__ import annotations

from typing import Any

import msgspec

from shardsched.core.errors import JobNotFound
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, JobStatus, TaskSpec, Timing
from shardsched.core.schedule_words import schedule_words
from shardsched.core.stored import decode_stored
from shardsched.core.views import Job
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.records import JOB_FIELDS, JobRecord, job_record, opt_from_ms

_spec_decoder = msgspec.json.Decoder(JobSpec)
_task_decoder = msgspec.json.Decoder(TaskSpec)
_timing_decoder = msgspec.json.Decoder(Timing)


def job_calls(dep: Deployment, job_id: str) -> list[Call]:
    sk = dep.keys_for(job_id)
    return [Call(("HMGET", sk.job(job_id), *JOB_FIELDS)), Call(("ZSCORE", sk.timer, job_id))]


def plain_job(dep: Deployment, job_id: str, rec: JobRecord, score: Any) -> Job:
    """A job of its own (not a DAG's task) from its record and timer score."""
    spec, invalid = decode_stored(_spec_decoder, rec.spec.encode())
    assert spec.schedule is not None
    return Job(
        job_id=job_id,
        name=spec.name,
        schedule=spec.schedule,
        schedule_words=schedule_words(spec.schedule),
        command=spec.command,
        timeout_s=spec.timeout_s,
        kill_grace_s=spec.kill_grace_s,
        retry_policy=spec.retry_policy,
        depends_on=spec.depends_on,
        catchup=spec.catchup,
        misfire_grace_s=spec.misfire_grace_s,
        overlap=spec.overlap,
        lease_s=spec.lease_s,
        status=JobStatus(rec.status),
        next_run_at=None if score is None else from_ms(int(float(score))),
        created_at=from_ms(rec.created_ms),
        updated_at=from_ms(rec.updated_ms),
        version=rec.version,
        shard=dep.keys_for(job_id).shard,
        auto_pause_after=spec.auto_pause_after,
        max_catchup=spec.max_catchup,
        pause_reason=rec.pause_reason,
        paused_at=opt_from_ms(rec.paused_ms),
        paused_until=opt_from_ms(rec.paused_until_ms),
        env=spec.env,
        retention=spec.retention,
        labels=spec.labels,
        args=spec.args,
        queue=spec.queue,
        priority=spec.priority,
        concurrency_key=spec.concurrency_key,
        concurrency_limit=spec.concurrency_limit,
        spread_s=spec.spread_s,
        no_next_run=_no_next_run(rec.no_next_fire, spec) if score is None else None,
        starts_at=spec.starts_at,
        ends_at=spec.ends_at,
        max_fires=spec.max_fires,
        fires_left=None if spec.max_fires is None else max(0, spec.max_fires - (rec.fires or 0)),
        on_resume=spec.on_resume,
        start_deadline_s=spec.start_deadline_s,
        finish_deadline_s=spec.finish_deadline_s,
        skip_late_start=spec.skip_late_start,
        expect_success_within_s=spec.expect_success_within_s,
        calendars=spec.calendars,
        catchup_per_minute=spec.catchup_per_minute,
        incarnation=rec.incarnation or 1,
        incarnation_started_at=opt_from_ms(rec.incarnation_ms),
        invalid=invalid,
        on=spec.on,
        backlog=spec.backlog,
    )


def _no_next_run(nf: str | None, spec: JobSpec) -> str | None:
    """Why an active job has no timer entry, as the job says it."""
    if nf == "exhausted" and spec.ends_at is not None:
        return "window_ended"
    return nf


def read_job(dep: Deployment, job_id: str) -> Op:
    job_fields, score = yield job_calls(dep, job_id)
    rec = None if k.is_dag_id(job_id) else job_record(check(job_fields))
    if rec is None:
        raise JobNotFound(job_id)
    if rec.dag_id is not None:  # a DAG's task
        return (yield from _read_task_job(dep, job_id, rec, rec.dag_id))
    return plain_job(dep, job_id, rec, check(score))


def _read_task_job(dep: Deployment, job_id: str, rec: JobRecord, dag_id: str) -> Op:
    """A DAG task's job: its schedule, status and next fire are its DAG's."""
    sk = dep.keys_for(dag_id)
    dag_fields, score = yield [
        Call(("HMGET", sk.job(dag_id), "timing", "status")),
        Call(("ZSCORE", sk.timer, dag_id)),
    ]
    timing_raw, dag_status = check(dag_fields)
    timing = _timing_decoder.decode(timing_raw)
    task = _task_decoder.decode(rec.spec)
    score = check(score)
    return Job(
        job_id=job_id,
        name=task.name,
        schedule=timing.schedule,
        schedule_words=schedule_words(timing.schedule),
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
        created_at=from_ms(rec.created_ms),
        updated_at=from_ms(rec.updated_ms),
        version=rec.version,
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
