"""Every SDK operation, once: a function from a client handle and its arguments to a
:class:`Plan` (the operation and the type of its result). :mod:`.sync` and :mod:`.aio`
bind each plan as a method that runs it, blocking or awaitable, so both clients have the
same methods with honest types."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from shardsched import ops
from shardsched.core.concurrency import KEY, KeyList, KeyView, LimitRequest, RateLimit
from shardsched.core.errors import BulkPartiallyApplied, ValidationError
from shardsched.core.field_errors import field_error
from shardsched.core.instants import to_ms
from shardsched.core.models import DagSpec, JobSpec, JobStatus, RunState
from shardsched.core.params import TriggerRequest
from shardsched.core.patches import JobPatch
from shardsched.core.validation import checked
from shardsched.core.views import (
    Dag,
    DagCreated,
    DagList,
    DagRun,
    DagRunList,
    DagTriggered,
    Job,
    JobCreated,
    JobList,
    Run,
    RunList,
    RunOutput,
    Triggered,
)
from shardsched.ops import listing
from shardsched.ops.dags import dag_runs
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.deployment import concurrency
from shardsched.ops.jobs import declare, names
from shardsched.ops.pagination import parse_cursor
from shardsched.store.deployment import Deployment

T = TypeVar("T")


class Handle(Protocol):
    """What a plan needs of a client: the deployment it talks to, and who it records as
    the author of its changes."""

    deployment: Deployment
    actor: str


class Plan(Generic[T]):
    """An operation whose result is a ``T``."""

    __slots__ = ("op",)

    def __init__(self, op: ops.Op) -> None:
        self.op = op


def as_validation_error(exc: msgspec.ValidationError) -> ValidationError:
    """msgspec's error as ours, its field named as the HTTP API names it
    (core/field_errors.py)."""
    return field_error(exc)


def _ms(when: datetime | None) -> int | None:
    return None if when is None else to_ms(when)


# jobs ------------------------------------------------------------


def validated_batches(specs: Iterable[JobSpec], batch: int) -> list[list[JobSpec]]:
    """Every spec validated before anything is written (a bad one raises ValidationError
    naming ``$[i].field``), then cut into batches of ``batch``."""
    chunk = list(specs)
    try:
        ops.validate_specs(chunk)
    except msgspec.ValidationError as exc:
        raise as_validation_error(exc) from None
    return [chunk[i : i + batch] for i in range(0, len(chunk), batch)]


@contextmanager
def bulk_progress(created: list[JobCreated]) -> Iterator[None]:
    """A failure after some batches were committed raises BulkPartiallyApplied listing
    ``created``; a failure of the first batch is raised as it is."""
    try:
        yield
    except Exception as exc:
        if not created:
            raise
        raise BulkPartiallyApplied(created, exc) from exc


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


# runs ------------------------------------------------------------


def get_run(c: Handle, run_id: str) -> Plan[Run]:
    return Plan(ops.get_run(c.deployment, run_id))


def list_runs(
    c: Handle,
    job_id: str,
    limit: int = 50,
    cursor: str | None = None,
    state: RunState | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Plan[RunList]:
    """A page of a job's runs, newest first by scheduled_for."""
    op = listing.runs_page(
        c.deployment, job_id, limit, parse_cursor(cursor), state, _ms(since), _ms(until)
    )
    return Plan(op)


def get_output(c: Handle, run_id: str) -> Plan[RunOutput]:
    return Plan(ops.get_output(c.deployment, run_id))


def list_dead_letter(c: Handle, limit: int = 50, cursor: str | None = None) -> Plan[RunList]:
    return Plan(listing.dead_letter_page(c.deployment, limit, parse_cursor(cursor)))


def list_failures(
    c: Handle,
    limit: int = 50,
    cursor: str | None = None,
    states: Iterable[RunState] = listing.FAILURE_STATES,
    since: datetime | None = None,
    until: datetime | None = None,
    name_prefix: str | None = None,
) -> Plan[RunList]:
    """The failure inbox: failed and dead-lettered runs of every job, latest first."""
    op = listing.failures_page(
        c.deployment,
        limit,
        parse_cursor(cursor),
        frozenset(states),
        _ms(since),
        _ms(until),
        name_prefix,
    )
    return Plan(op)


def retry_run(c: Handle, run_id: str) -> Plan[Run]:
    """Send a dead-lettered run back as a new attempt."""
    return Plan(ops.retry_run(c.deployment, run_id, c.actor))


# DAGs ------------------------------------------------------------


def add_dag(c: Handle, spec: DagSpec) -> Plan[DagCreated]:
    """Register a DAG; a bad one (unknown dependency, duplicate task, the cycle named)
    raises ValidationError and writes nothing."""
    return Plan(dag_ops.create_dag(c.deployment, spec, c.actor))


def put_dag(
    c: Handle, dag_id: str, spec: DagSpec, if_match: int | None = None
) -> Plan[tuple[Dag, declare.Outcome]]:
    """Create the DAG ``dag_id``, or replace its definition as a new version (DAG runs
    already open finish on theirs). Returns the DAG and what was done."""
    return Plan(declare.put_dag(c.deployment, dag_id, spec, if_match, c.actor))


def get_dag(c: Handle, dag_id: str) -> Plan[Dag]:
    return Plan(dag_ops.get_dag(c.deployment, dag_id))


def list_dags(
    c: Handle,
    limit: int = 50,
    cursor: str | None = None,
    status: JobStatus | None = None,
    name_prefix: str | None = None,
    include_deleted: bool = False,
    labels: dict[str, str] | None = None,
) -> Plan[DagList]:
    op = listing.dags_page(
        c.deployment, limit, parse_cursor(cursor), status, name_prefix, (), include_deleted, labels
    )
    return Plan(op)


def pause_dag(c: Handle, dag_id: str) -> Plan[Dag]:
    return Plan(dag_ops.set_dag_status(c.deployment, dag_id, JobStatus.PAUSED, c.actor))


def resume_dag(c: Handle, dag_id: str) -> Plan[Dag]:
    return Plan(dag_ops.set_dag_status(c.deployment, dag_id, JobStatus.ACTIVE, c.actor))


def delete_dag(c: Handle, dag_id: str) -> Plan[Dag]:
    return Plan(dag_ops.delete_dag(c.deployment, dag_id, c.actor))


def trigger_dag(c: Handle, dag_id: str, args: dict[str, Any] | None = None) -> Plan[DagTriggered]:
    """Open a DAG run now; its tasks get ``args`` (``ctx.args``, ``SHARDSCHED_ARGS``)."""
    return Plan(dag_ops.trigger_dag(c.deployment, dag_id, c.actor, trigger_request(args)))


def list_dag_runs(
    c: Handle, dag_id: str, limit: int = 50, cursor: str | None = None
) -> Plan[DagRunList]:
    return Plan(listing.dag_runs_page(c.deployment, dag_id, limit, parse_cursor(cursor)))


def get_dag_run(c: Handle, dag_run_id: str) -> Plan[DagRun]:
    return Plan(dag_runs.get_dag_run(c.deployment, dag_run_id))


# concurrency keys ------------------------------------------------


def _key(key: str) -> str:
    if not KEY.match(key):
        raise ValidationError(f"{key!r} is not a concurrency key", "key")
    return key


def set_concurrency_limits(
    c: Handle, key: str, limit: int | None = None, rate: tuple[int, float] | None = None
) -> Plan[KeyView]:
    """Set ``key``'s limit (runs at once) and ``rate`` (starts, per seconds); what is left
    out is cleared. Live at the next start, and recorded in the key's change log."""
    try:
        request = checked(LimitRequest(limit, None if rate is None else RateLimit(*rate)))
    except msgspec.ValidationError as exc:
        raise as_validation_error(exc) from None
    return Plan(concurrency.set_limits(c.deployment, _key(key), request, c.actor))


def clear_concurrency_limits(c: Handle, key: str) -> Plan[KeyView]:
    return Plan(concurrency.clear_limits(c.deployment, _key(key), c.actor))


def get_concurrency_key(c: Handle, key: str) -> Plan[KeyView]:
    return Plan(concurrency.get_key(c.deployment, _key(key)))


def list_concurrency_keys(c: Handle) -> Plan[KeyList]:
    return Plan(concurrency.list_keys(c.deployment))
