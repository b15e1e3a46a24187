"""The SDK's plans for runs under way (:mod:`.plans` has the rest): what is running,
queued, waiting or retrying across jobs, and cancelling a run or a DAG run; and
restoring a deleted job."""

from __future__ import annotations

from collections.abc import Sequence

from shardsched import ops
from shardsched.core.views import BulkRetry, Dag, DagRun, Job, Run, RunList
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.pagination import parse_cursor
from shardsched.ops.runs import bulk_retry, control
from shardsched.ops.runs.active import Active, Filters, active_page
from shardsched.sdk.plans import Handle, Plan


def list_runs_under_way(
    c: Handle,
    state: str = "running",
    limit: int = 50,
    cursor: str | None = None,
    job_id: str | None = None,
    queue: str | None = None,
    worker: str | None = None,
    labels: dict[str, str] | None = None,
) -> Plan[RunList]:
    """Runs in ``state`` (running, queued, waiting or retrying) across jobs, by shard and
    place in line; follow ``next_cursor`` until it is None (a page may be short)."""
    filters = Filters(job_id, queue, worker, labels or {})
    return Plan(
        active_page(c.deployment, Active.parse(state), limit, parse_cursor(cursor), filters)
    )


def cancel_run(c: Handle, run_id: str, reason: str = "") -> Plan[Run]:
    """Cancel a run: it ends ``cancelled`` with who and why, and is not retried; a running
    one is stopped (SIGTERM, then SIGKILL after its job's ``kill_grace_s``) at its
    worker's next lease renewal."""
    return Plan(control.cancel_run(c.deployment, run_id, c.actor, reason))


def cancel_dag_run(c: Handle, dag_run_id: str, reason: str = "") -> Plan[DagRun]:
    """Cancel a DAG run and every task run of it not yet ended."""
    return Plan(control.cancel_dag_run(c.deployment, dag_run_id, c.actor, reason))


def retry_runs(c: Handle, run_ids: Sequence[str], dry_run: bool = False) -> Plan[BulkRetry]:
    """Retry many dead-lettered runs (each refusal says why and what to do instead)."""
    return Plan(bulk_retry.retry_many(c.deployment, list(run_ids), c.actor, dry_run))


def restore_job(c: Handle, job_id: str) -> Plan[Job]:
    """A deleted job back with its last definition, as its new incarnation."""
    return Plan(ops.restore_job(c.deployment, job_id, c.actor))


def restore_dag(c: Handle, dag_id: str) -> Plan[Dag]:
    """A deleted DAG back with its last definition, as its new incarnation."""
    return Plan(dag_ops.restore_dag(c.deployment, dag_id, c.actor))
