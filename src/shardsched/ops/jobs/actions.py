"""What is done to a job besides changing its definition: delete it, trigger it now, and
the shard owner's auto-resume of a pause with an end.

Written as :mod:`shardsched.store.calls` generators, like :mod:`.jobs`.
"""

from __future__ import annotations

import msgspec

from shardsched.core.access import SDK_ACTOR, SYSTEM_ACTOR
from shardsched.core.errors import (
    ConflictError,
    DagTaskJob,
    IdempotencyKeyReused,
    JobDeleted,
    JobNotFound,
)
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.models import JobSpec, JobStatus
from shardsched.core.params import IDEMPOTENCY_TTL_S, TriggerRequest, validate_args
from shardsched.core.patches import JobPatch
from shardsched.core.views import Triggered
from shardsched.ops import triggers as after
from shardsched.ops.jobs.change import patch_job
from shardsched.ops.jobs.define import create_jobs
from shardsched.ops.jobs.read import read_job
from shardsched.store import keys as k
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import jobs as lua

_spec_decoder = msgspec.json.Decoder(JobSpec)


def resume_if_due(dep: Deployment, job_id: str, until_ms: int) -> Op:
    """The shard owner's auto-resume: resume the job if it is still paused until
    ``until_ms`` (a later pause or resume by hand wins); returns whether it resumed."""
    sk = dep.keys_for(job_id)
    try:
        job = yield from read_job(dep, job_id)
    except JobNotFound:
        job = None
    if job is None or job.status != JobStatus.PAUSED or job.paused_until is None:
        yield [Call(("ZREM", sk.resumes, job_id))]
        return False
    if to_ms(job.paused_until) != until_ms:
        return False
    try:
        yield from patch_job(dep, job_id, JobPatch(status=JobStatus.ACTIVE), SYSTEM_ACTOR)
    except (JobDeleted, JobNotFound):
        return False
    return True


def delete_job(dep: Deployment, job_id: str, actor: str = SDK_ACTOR) -> Op:
    """Delete a job, keeping its definition and runs readable; returns the deleted Job.
    Deleting it again changes nothing and answers the same (a retried DELETE is fine)."""
    job = yield from read_job(dep, job_id)
    if job.dag_id is not None:
        raise DagTaskJob(job_id, job.dag_id)
    if job.status == JobStatus.DELETED:
        return job
    sk = dep.keys_for(job_id)
    (reply,) = yield [lua.delete_job(sk, dep.globals, job_id, actor, job.name)]
    code = check(reply)[0]
    if code != lua.JobReply.DELETED:  # deleted meanwhile by another DELETE: the same answer
        lua.raise_refusal(code, job_id)
    if job.on:  # a deleted job listens to nothing, and runs after nothing
        yield [
            Call(("SREM", dep.globals.listeners(r.event), job_id)) for r in job.on if r.event
        ] + after.unmarks(dep, job_id, after.upstreams(job.on))
    return (yield from read_job(dep, job_id))


def restore_job(dep: Deployment, job_id: str, actor: str = SDK_ACTOR) -> Op:
    """Bring a deleted job back with the definition it had, as its new incarnation
    (register_job.lua); returns the Job. Not deleted: ConflictError."""
    job = yield from read_job(dep, job_id)
    if job.dag_id is not None:
        raise DagTaskJob(job_id, job.dag_id)
    if job.status != JobStatus.DELETED:
        raise ConflictError(f"job {job_id!r} is {job.status.value}: only a deleted job is restored")
    (raw,) = yield [Call(("HGET", dep.keys_for(job_id).job(job_id), "spec"))]
    spec = msgspec.structs.replace(_spec_decoder.decode(check(raw)), id=job_id)
    yield from create_jobs(dep, [spec], validated=True, actor=actor)
    return (yield from read_job(dep, job_id))


def trigger(
    dep: Deployment,
    job_id: str,
    actor: str = SDK_ACTOR,
    request: TriggerRequest | None = None,
) -> Op:
    """Create a run of the job now, whatever its schedule, with the request's args instead
    of the job's; returns Triggered. With an idempotency key used on the job within
    IDEMPOTENCY_TTL_S, makes nothing and returns that trigger's run (``repeated``)."""
    request = request or TriggerRequest()
    args_json = validate_args(request.args)
    sk = dep.keys_for(job_id)
    (dag,) = yield [Call(("HGET", sk.job(job_id), "dag"))]
    if check(dag) is not None:
        raise DagTaskJob(job_id, dag.decode())
    if k.is_dag_id(job_id):
        raise JobNotFound(job_id)
    key = request.idempotency_key or ""
    call = lua.trigger(sk, job_id, actor, args_json, key, IDEMPOTENCY_TTL_S * 1000)
    (reply,) = yield [call]
    reply = check(reply)
    lua.raise_refusal(reply[0], job_id)
    run_id = reply[1].decode()
    if reply[0] == lua.JobReply.REPEATED:
        s, first_args = yield [
            Call(("HGET", sk.run(run_id), "s")),
            Call(("HGET", sk.run(run_id), "args")),
        ]
        if not _same_args(check(first_args) or b"", args_json):
            raise IdempotencyKeyReused(key, run_id)  # not the same request: say so
        at = int(check(s) or reply[2])
        return Triggered(run_id=run_id, scheduled_for=from_ms(at), repeated=True)
    yield ready.push(dep.globals, [sk.shard], ready.woken(reply[3]))
    return Triggered(run_id=run_id, scheduled_for=from_ms(int(reply[2])))


def _same_args(first: bytes, now: bytes) -> bool:
    """Whether two triggers' args (JSON, b"" for none) are the same values, the order of
    an object's keys aside and types kept (``false`` is not ``0``, ``1`` not ``1.0``,
    as Python's ``==`` would have them)."""
    if first == now:
        return True
    if not first or not now:
        return False
    return _canonical(first) == _canonical(now)


def _canonical(raw: bytes) -> bytes:
    return msgspec.json.encode(msgspec.json.decode(raw), order="sorted")
