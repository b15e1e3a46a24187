"""The routes of an operator's control over runs across jobs (the failure inbox, what is
under way, retry and cancel) and over a deleted job or DAG (restore): part of the route table
(:mod:`.routes`)."""

from __future__ import annotations

from shardsched.core import views as v
from shardsched.core.params import CancelRequest, RetryRequest
from shardsched.router import schemas as q
from shardsched.router.operation import BODY_ERRORS, Operation

CONTROL_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/dags/{dag_id}/restore",
        "Bring a deleted DAG back with its last definition, as a new incarnation (its"
        " earlier DAG runs stay in its history)",
        v.Dag,
        201,
        errors=(404, 409),
        tags=("dags",),
        handler="restore_dag",
    ),
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/restore",
        "Bring a deleted job back with its last definition, as a new incarnation (its"
        " earlier runs stay in its history)",
        v.Job,
        201,
        errors=(404, 409),
        tags=("jobs",),
        handler="restore_job",
    ),
    Operation(
        "get",
        "/api/v1/runs",
        "The failure inbox (failed, dead-lettered), or runs under way (?state=running,"
        " queued, waiting, retrying), across jobs",
        v.RunList,
        query=q.FailureQuery,
        errors=(422,),
        tags=("runs",),
        handler="list_failures",
    ),
    Operation(
        "post",
        "/api/v1/dead-letter/retry",
        "Retry dead-lettered runs: those named, or all the failure inbox lists for a filter;"
        " dry_run says what it would do",
        v.BulkRetry,
        201,
        RetryRequest,
        errors=(*BODY_ERRORS, 404),
        tags=("runs",),
        handler="retry_runs",
    ),
    Operation(
        "post",
        "/api/v1/runs/{run_id}/cancel",
        "Cancel a run (queued, waiting, retrying or running): it ends cancelled, not retried",
        v.Run,
        body=CancelRequest,
        body_optional=True,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("runs",),
        handler="cancel_run",
    ),
    Operation(
        "post",
        "/api/v1/dag-runs/{dag_run_id}/cancel",
        "Cancel a DAG run and every task run of it not yet ended",
        v.DagRun,
        body=CancelRequest,
        body_optional=True,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("dags",),
        handler="cancel_dag_run",
    ),
)
