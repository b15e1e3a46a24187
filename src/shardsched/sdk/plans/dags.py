"""Plans on DAGs: register, put, read, list, pause, resume, delete, restore, trigger, its
runs and change log, one DAG run, cancelling it and repairing it (clear, mark)."""

from __future__ import annotations

from typing import Any, Literal

from shardsched.core.dag_repair import ClearRequest, MarkRequest, RepairPlan
from shardsched.core.models import (
    DagSpec,
    JobStatus,
)
from shardsched.core.views import (
    ChangeList,
    Dag,
    DagCreated,
    DagList,
    DagRun,
    DagRunList,
    DagTriggered,
)
from shardsched.ops import listing
from shardsched.ops.dags import dag_runs, repair
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.history import changes
from shardsched.ops.jobs import declare
from shardsched.ops.pagination import parse_cursor
from shardsched.ops.runs import control
from shardsched.sdk.plans import Handle, Plan, page_size
from shardsched.sdk.plans.jobs import trigger_request


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
    page_size(limit)
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


def restore_dag(c: Handle, dag_id: str) -> Plan[Dag]:
    """A deleted DAG back with its last definition, as its new incarnation."""
    return Plan(dag_ops.restore_dag(c.deployment, dag_id, c.actor))


def trigger_dag(c: Handle, dag_id: str, args: dict[str, Any] | None = None) -> Plan[DagTriggered]:
    """Open a DAG run now; its tasks get ``args`` (``ctx.args``, ``SHARDSCHED_ARGS``)."""
    return Plan(dag_ops.trigger_dag(c.deployment, dag_id, c.actor, trigger_request(args)))


def list_dag_runs(
    c: Handle, dag_id: str, limit: int = 50, cursor: str | None = None
) -> Plan[DagRunList]:
    page_size(limit)
    return Plan(listing.dag_runs_page(c.deployment, dag_id, limit, parse_cursor(cursor)))


def get_dag_run(c: Handle, dag_run_id: str) -> Plan[DagRun]:
    return Plan(dag_runs.get_dag_run(c.deployment, dag_run_id))


def cancel_dag_run(c: Handle, dag_run_id: str, reason: str = "") -> Plan[DagRun]:
    """Cancel a DAG run and every task run of it not yet ended."""
    return Plan(control.cancel_dag_run(c.deployment, dag_run_id, c.actor, reason))


def clear_task(
    c: Handle,
    dag_run_id: str,
    task: str,
    downstream: bool = True,
    upstream: bool = False,
    only_failed: bool = False,
    dry_run: bool = False,
    token: str | None = None,
    note: str = "",
) -> Plan[RepairPlan]:
    """Clear a task of a DAG run to run it again as a new attempt (with its downstream,
    upstream, only what failed); ``dry_run`` returns the plan and its token, and a token
    given applies exactly that plan or raises ConflictError if the DAG run moved."""
    request = ClearRequest(
        task=task,
        downstream=downstream,
        upstream=upstream,
        only_failed=only_failed,
        dry_run=dry_run,
        token=token,
        note=note,
    )
    return Plan(repair.clear_tasks(c.deployment, dag_run_id, request, c.actor))


def mark_task(
    c: Handle,
    dag_run_id: str,
    task: str,
    state: Literal["succeeded", "failed"],
    note: str = "",
    dry_run: bool = False,
    token: str | None = None,
) -> Plan[RepairPlan]:
    """Mark a task of a DAG run succeeded or failed, with a note; its skipped downstream
    is decided again as if it had ended so."""
    request = MarkRequest(task=task, state=state, note=note, dry_run=dry_run, token=token)
    return Plan(repair.mark_task(c.deployment, dag_run_id, request, c.actor))


def dag_changes(
    c: Handle, dag_id: str, limit: int = 50, cursor: str | None = None
) -> Plan[ChangeList]:
    page_size(limit)
    return Plan(changes.dag_changes(c.deployment, dag_id, limit, cursor))
