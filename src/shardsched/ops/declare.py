"""Declarative registration: put a job (or DAG) under an id its user chose, creating it or
replacing its definition as a new version, or doing nothing when the definition is
unchanged. What ``PUT /api/v1/jobs/{id}``, the SDK's ``put_job`` and ``shardsched apply``
share; ``if_match`` is optimistic concurrency on the version (HTTP ``If-Match``).
"""

from __future__ import annotations

import enum

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.errors import (
    IdTaken,
    JobNotFound,
    PreconditionFailed,
    ShardschedError,
    ValidationError,
)
from shardsched.core.models import JOB_ID, JobSpec
from shardsched.core.validation import validate_spec
from shardsched.ops.jobs import changeable_job, create_jobs, read_job, write_spec
from shardsched.store.calls import Op
from shardsched.store.deployment import Deployment


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
) -> Op:
    """Create the job ``job_id`` with ``spec``, or replace its definition (its status and
    pause stay as they are); returns ``(Job, Outcome)``.

    A replaced schedule is planned from now; an unchanged one keeps its next fire. A
    deleted job is not brought back (its id stays with its history): JobDeleted."""
    if not JOB_ID.match(job_id):
        raise ValidationError(
            "a job id is letters, digits, '_' and '-' (at most 100), not starting with 'dag_'",
            "$.id",
        )
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
        except JobNotFound:
            if if_match is not None:
                raise PreconditionFailed(job_id, if_match, None) from None
            try:
                yield from create_jobs(dep, [msgspec.structs.replace(spec, id=job_id)], True, actor)
            except IdTaken:
                continue  # another put created it meanwhile: compare with that one
            return (yield from read_job(dep, job_id)), Outcome.CREATED
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
