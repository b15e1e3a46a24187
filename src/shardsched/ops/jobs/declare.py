"""Declarative registration: put a job (or DAG) under an id its user chose, creating it or
replacing its definition as a new version, or doing nothing when the definition is
unchanged. What ``PUT /api/v1/jobs/{id}``, the SDK's ``put_job`` and ``shardsched apply``
share; ``if_match`` is optimistic concurrency on the version (HTTP ``If-Match``).
"""

from __future__ import annotations

import enum

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.app_sets import check_hand_change, check_owner
from shardsched.core.errors import (
    DagDeleted,
    DagNotFound,
    IdTaken,
    JobDeleted,
    JobNotFound,
    PreconditionFailed,
    ShardschedError,
    ValidationError,
)
from shardsched.core.ids import dag_id_of
from shardsched.core.models import DagSpec, JobSpec, JobStatus
from shardsched.core.sameness import same_definition
from shardsched.core.validation import check_dag_id, check_job_id, validate_spec
from shardsched.ops import triggers
from shardsched.ops.dags import manage
from shardsched.ops.jobs.change import changeable_job, spec_of, write_spec
from shardsched.ops.jobs.define import create_jobs
from shardsched.ops.jobs.read import read_job
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import dags as dags_lua
from shardsched.store.lua.jobs import JobReply

_dag_decoder = msgspec.json.Decoder(DagSpec)


class Outcome(enum.StrEnum):
    """What a put did."""

    CREATED = "created"
    UPDATED = "updated"  #: a new version
    UNCHANGED = "unchanged"  #: the same definition: no new version, nothing written


def check_body_id(any_id: str, body_id: str | None) -> None:
    """A body's ``id``, if it has one, must be the path's."""
    if body_id is not None and body_id != any_id:
        raise ValidationError(f"the body's id {body_id!r} is not the path's {any_id!r}", "$.id")


def put_job(
    dep: Deployment,
    job_id: str,
    spec: JobSpec,
    if_match: int | None = None,
    actor: str = SDK_ACTOR,
    writer: str = "",
    paused: bool = False,
) -> Op:
    """Create the job ``job_id`` with ``spec``, or replace its definition (its status and
    pause stay as they are); returns ``(Job, Outcome)``. ``writer``: the app set a deploy
    writes as ('' by hand: an app's own stay its own, core/apps.check_owner).
    ``paused``: a job this put creates is created paused, no tick firing before (it is
    registered with no timer entry, then paused); an existing one's state stays.

    A replaced schedule is planned from now; an unchanged one keeps its next fire. A
    deleted job's id is created again as its new incarnation (its history stays)."""
    check_job_id(job_id)
    check_body_id(job_id, spec.id)
    if spec.depends_on:
        raise ValidationError(
            "a DAG's tasks are declared with their DAG (PUT /api/v1/dags/{id})", "$.depends_on"
        )
    spec = msgspec.structs.replace(spec, id=None)
    validate_spec(spec)
    for _attempt in range(16):
        try:
            job = yield from changeable_job(dep, job_id, if_match)
        except (JobNotFound, JobDeleted):
            if if_match is not None:
                raise PreconditionFailed(job_id, if_match, None) from None
            try:
                new = [msgspec.structs.replace(spec, id=job_id)]
                yield from create_jobs(dep, new, True, actor, writer, held=paused)
            except IdTaken:
                continue  # another put created it meanwhile: compare with that one
            job = yield from read_job(dep, job_id)
            if paused:
                written = yield from write_spec(
                    dep, job, spec_of(job), JobStatus.PAUSED, None, None, False, actor
                )
                job = written if written is not None else (yield from read_job(dep, job_id))
            return job, Outcome.CREATED
        check_owner(job.labels, spec.labels, writer)
        if not same_definition(spec_of(job), spec):
            check_hand_change(job.labels, job_id, writer)
        assert job.schedule is not None and spec.schedule is not None
        replan = msgspec.json.encode(spec.schedule) != msgspec.json.encode(job.schedule)
        written = yield from write_spec(
            dep, job, spec, job.status, job.pause_reason, job.paused_until, replan, actor
        )
        if written is not None:
            same = written.version == job.version
            return written, Outcome.UNCHANGED if same else Outcome.UPDATED
        # the version moved meanwhile: read it again (with if_match that read refuses)
    raise ShardschedError(f"job {job_id!r} is being changed concurrently; try again")


def put_dag(
    dep: Deployment,
    dag_id: str,
    spec: DagSpec,
    if_match: int | None = None,
    actor: str = SDK_ACTOR,
    writer: str = "",
) -> Op:
    """:func:`_put_dag`, holding the lock of ``after`` chains when the DAG runs after
    another (ops/triggers.py)."""
    op = _put_dag(dep, dag_id, spec, if_match, actor, writer)
    if any(r.after for r in spec.on):
        return (yield from triggers.locked(dep, op))
    return (yield from op)


def _put_dag(
    dep: Deployment,
    dag_id: str,
    spec: DagSpec,
    if_match: int | None = None,
    actor: str = SDK_ACTOR,
    writer: str = "",
) -> Op:
    """Create the DAG ``dag_id`` with ``spec``, or replace its definition (tasks added,
    removed, re-wired, their commands, its schedule and limits) as a new version; returns
    ``(Dag, Outcome)``. DAG runs already open finish on the version they opened on; a
    paused DAG stays paused; a deleted one comes back as its next incarnation."""
    check_dag_id(dag_id)
    dag_id = dag_id_of(dag_id)
    check_body_id(dag_id, None if spec.id is None else dag_id_of(spec.id))
    spec = _dag_decoder.decode(msgspec.json.encode(msgspec.structs.replace(spec, id=None)))
    order, roots, items = manage.task_items(spec)  # validates: nothing written if bad
    wanted = msgspec.json.encode(spec)
    revived = False
    for _attempt in range(16):
        try:
            dag = yield from manage.get_dag(dep, dag_id)
        except DagNotFound:
            if if_match is not None:
                raise PreconditionFailed(dag_id, if_match, None) from None
            try:
                new = msgspec.structs.replace(spec, id=dag_id)
                yield from manage.create_dag_unlocked(dep, new, actor, writer)
            except IdTaken:
                continue
            return (yield from manage.get_dag(dep, dag_id)), Outcome.CREATED
        if dag.status == JobStatus.DELETED:  # created again: its next incarnation, then as below
            if if_match is not None and dag.version != if_match:
                raise PreconditionFailed(dag_id, if_match, dag.version)
            dag = yield from manage.restore_dag(dep, dag_id, actor)
            if_match = None
            revived = True
        if if_match is not None and dag.version != if_match:
            raise PreconditionFailed(dag_id, if_match, dag.version)
        check_owner(dag.labels, spec.labels, writer)
        sk = dep.keys_for(dag_id)
        (raw, now) = yield [Call(("HGET", sk.job(dag_id), "spec")), Call(("TIME",))]
        old = _dag_decoder.decode(check(raw))
        if same_definition(old, spec):
            return dag, Outcome.CREATED if revived else Outcome.UNCHANGED
        check_hand_change(dag.labels, dag_id, writer)
        yield from triggers.declare(dep, dag_id, spec.on)  # before: no event or end missed
        timing = msgspec.json.encode(manage.dag_timing(spec, dag_id))
        next_fire: int | str = "="
        if msgspec.json.encode(old.schedule) != msgspec.json.encode(spec.schedule):
            first = manage.dag_first_ms(spec, dag_id, server_ms(now))
            next_fire = "" if first is None else first
        if dag.status == JobStatus.PAUSED:
            next_fire = ""
        (reply,) = yield [
            dags_lua.update_dag(
                sk,
                dep.globals,
                dag_id,
                version=dag.version,
                spec_json=wanted,
                timing_json=timing,
                next_fire=next_fire,
                roll=timing != msgspec.json.encode(manage.dag_timing(old, dag_id)),
                max_active_runs=spec.max_active_runs,
                stall_sla_ms=round(spec.stall_sla_s * 1000),
                catchup=spec.catchup,
                order=order,
                roots=roots,
                task_items=items,
                actor=actor,
            )
        ]
        code = check(reply)[0]
        if code == JobReply.DELETED:
            raise DagDeleted(dag_id)
        if code == JobReply.OK:
            done = Outcome.CREATED if revived else Outcome.UPDATED
            yield from triggers.retract(dep, dag_id, old.on, spec.on)
            return (yield from manage.get_dag(dep, dag_id)), done
        # NO_SUCH_JOB: gone meanwhile; VERSION_MOVED: read it again
    raise ShardschedError(f"DAG {dag_id!r} is being changed concurrently; try again")
