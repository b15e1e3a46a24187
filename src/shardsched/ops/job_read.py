"""Reading a job back: its hash and timer score into the :class:`Job` the surfaces show
(a DAG task's job takes its schedule, status and next fire from its DAG)."""

from __future__ import annotations

from typing import Any

import msgspec

from shardsched.core.errors import JobNotFound
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, JobStatus, TaskSpec, Timing
from shardsched.core.stored import decode_stored
from shardsched.core.views import Job
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.records import JOB_FIELDS, opt_ms, opt_text

_spec_decoder = msgspec.json.Decoder(JobSpec)
_task_decoder = msgspec.json.Decoder(TaskSpec)
_timing_decoder = msgspec.json.Decoder(Timing)


def job_calls(dep: Deployment, job_id: str) -> list[Call]:
    sk = dep.keys_for(job_id)
    return [Call(("HMGET", sk.job(job_id), *JOB_FIELDS)), Call(("ZSCORE", sk.timer, job_id))]


def plain_job(dep: Deployment, job_id: str, fields: list[Any], score: Any) -> Job:
    """A job of its own (not a DAG's task) from its hash fields and timer score."""
    spec_raw, status, created, updated, version, _dag, reason, paused_at, until = fields[:9]
    inc, born, nf, fc = fields[9:13]
    spec, invalid = decode_stored(_spec_decoder, spec_raw)
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
        start_deadline_s=spec.start_deadline_s,
        finish_deadline_s=spec.finish_deadline_s,
        skip_late_start=spec.skip_late_start,
        expect_success_within_s=spec.expect_success_within_s,
        calendars=spec.calendars,
        catchup_per_minute=spec.catchup_per_minute,
        incarnation=int(inc or 1),
        incarnation_started_at=opt_ms(born),
        invalid=invalid,
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
