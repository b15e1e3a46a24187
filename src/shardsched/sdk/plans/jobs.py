"""Plans on jobs: register (one, or validated batches), put, read, list, change,
pause, resume, delete, restore, trigger, and a job's versions and change log."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from shardsched import ops
from shardsched.core.models import (
    JobSpec,
    JobStatus,
)
from shardsched.core.params import TriggerRequest
from shardsched.core.patches import JobPatch
from shardsched.core.views import (
    ChangeList,
    Job,
    JobCreated,
    JobList,
    JobVersions,
    Triggered,
)
from shardsched.ops import listing
from shardsched.ops.history import changes
from shardsched.ops.jobs import declare, names
from shardsched.ops.pagination import parse_cursor
from shardsched.sdk.plans import Handle, Plan, as_validation_error, page_size


def add_validated(c: Handle, specs: Sequence[JobSpec]) -> Plan[list[JobCreated]]:
    """One batch of a bulk registration (validated by :func:`validated_batches`)."""
    return Plan(ops.create_jobs(c.deployment, specs, True, c.actor))


def add_job(c: Handle, spec: JobSpec, unique_name: bool = False) -> Plan[JobCreated]:
    """Register a job; ``unique_name``: refused (NameTaken) if a job has its name."""
    if unique_name:
        return Plan(names.create_named(c.deployment, spec, c.actor))
    return Plan(ops.create_job(c.deployment, spec, c.actor))


def jobs_named(c: Handle, name: str) -> Plan[list[Job]]:
    """The jobs (not deleted) of exactly this name, oldest first."""
    return Plan(names.jobs_named(c.deployment, name))


def put_job(
    c: Handle, job_id: str, spec: JobSpec, if_match: int | None = None
) -> Plan[tuple[Job, declare.Outcome]]:
    """Create the job ``job_id``, or replace its definition as a new version (unchanged:
    nothing written); ``if_match``: only if it is at that version (else
    PreconditionFailed). Returns the job and what was done."""
    return Plan(declare.put_job(c.deployment, job_id, spec, if_match, c.actor))


def get_job(c: Handle, job_id: str) -> Plan[Job]:
    return Plan(ops.get_job(c.deployment, job_id))


def list_jobs(
    c: Handle,
    limit: int = 50,
    cursor: str | None = None,
    status: JobStatus | None = None,
    name_prefix: str | None = None,
    include_deleted: bool = False,
    labels: dict[str, str] | None = None,
) -> Plan[JobList]:
    """A page of jobs, newest first; pass ``next_cursor`` back for the next page. Deleted
    jobs only with ``include_deleted`` (or ``status=JobStatus.DELETED``); with ``labels``,
    those that have every one."""
    page_size(limit)
    op = listing.jobs_page(
        c.deployment, limit, parse_cursor(cursor), status, name_prefix, (), include_deleted, labels
    )
    return Plan(op)


def update_job(c: Handle, job_id: str, patch: JobPatch) -> Plan[Job]:
    return Plan(ops.patch_job(c.deployment, job_id, patch, c.actor))


def pause(
    c: Handle, job_id: str, reason: str | None = None, until: datetime | None = None
) -> Plan[Job]:
    """Pause; with ``until`` the job resumes by itself then."""
    patch = JobPatch(status=JobStatus.PAUSED, pause_reason=reason, paused_until=until)
    return update_job(c, job_id, patch)


def resume(c: Handle, job_id: str) -> Plan[Job]:
    return update_job(c, job_id, JobPatch(status=JobStatus.ACTIVE))


def delete_job(c: Handle, job_id: str) -> Plan[Job]:
    return Plan(ops.delete_job(c.deployment, job_id, c.actor))


def restore_job(c: Handle, job_id: str) -> Plan[Job]:
    """A deleted job back with its last definition, as its new incarnation."""
    return Plan(ops.restore_job(c.deployment, job_id, c.actor))


def trigger_request(
    args: dict[str, Any] | None = None, idempotency_key: str | None = None
) -> TriggerRequest:
    """A trigger's options, validated as the API validates its body."""
    given = {"args": args, "idempotency_key": idempotency_key}
    try:
        return msgspec.convert({k: v for k, v in given.items() if v is not None}, TriggerRequest)
    except msgspec.ValidationError as exc:
        raise as_validation_error(exc) from None


def trigger(
    c: Handle,
    job_id: str,
    args: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> Plan[Triggered]:
    """Run the job now, with ``args`` instead of its own; a second call with the same
    ``idempotency_key`` within a day makes no run and returns the first's (``repeated``)."""
    request = trigger_request(args, idempotency_key)
    return Plan(ops.trigger(c.deployment, job_id, c.actor, request))


def job_versions(c: Handle, job_id: str) -> Plan[JobVersions]:
    return Plan(ops.job_versions(c.deployment, job_id))


def job_changes(
    c: Handle, job_id: str, limit: int = 50, cursor: str | None = None
) -> Plan[ChangeList]:
    """Who changed the job, how and when, newest first (``next_cursor`` for more)."""
    page_size(limit)
    return Plan(changes.job_changes(c.deployment, job_id, limit, cursor))
