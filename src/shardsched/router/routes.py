"""The route table: every HTTP route once, with its method, path, summary, body, query,
answer, error statuses and the handler that answers it. :mod:`.app` builds the starlette
routes from it and :mod:`.openapi` the OpenAPI document, so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shardsched.core import views as v
from shardsched.core.models import (
    BackfillRequest,
    DagPatch,
    DagSpec,
    JobPatch,
    JobSpec,
    SchedulePreviewRequest,
)
from shardsched.ops import protocol
from shardsched.ops.audit import TickList
from shardsched.ops.cluster import ClusterView, WorkerList
from shardsched.ops.status import Status
from shardsched.router import schemas as q
from shardsched.router.schemas import Health, Readiness


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    answer: type | None
    status: int = 200
    body: type | None = None
    query: type | None = None
    errors: tuple[int, ...] = ()
    tags: tuple[str, ...] = field(default=())
    #: the :class:`~shardsched.router.app.Api` method that answers it
    handler: str = ""


BODY_ERRORS = (400, 413, 422)
OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/jobs",
        "Register a job",
        v.JobCreated,
        201,
        JobSpec,
        errors=(*BODY_ERRORS, 409),
        tags=("jobs",),
        handler="create_job",
    ),
    Operation(
        "get",
        "/api/v1/jobs",
        "List jobs, newest first",
        v.JobList,
        query=q.JobQuery,
        errors=(422,),
        tags=("jobs",),
        handler="list_jobs",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}",
        "A job: definition, status, next run",
        v.Job,
        errors=(404,),
        tags=("jobs",),
        handler="get_job",
    ),
    Operation(
        "patch",
        "/api/v1/jobs/{job_id}",
        "Change, pause or resume a job",
        v.Job,
        body=JobPatch,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("jobs",),
        handler="patch_job",
    ),
    Operation(
        "delete",
        "/api/v1/jobs/{job_id}",
        "Delete a job, keeping its history",
        v.Job,
        errors=(404, 409),
        tags=("jobs",),
        handler="delete_job",
    ),
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/trigger",
        "Run a job now",
        v.Triggered,
        201,
        errors=(404, 409, 422),
        tags=("jobs",),
        handler="trigger",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/runs",
        "A job's runs, newest first",
        v.RunList,
        query=q.RunQuery,
        errors=(404, 422),
        tags=("runs",),
        handler="list_runs",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/versions",
        "A job's definitions over time",
        v.JobVersions,
        errors=(404, 409),
        tags=("jobs",),
        handler="job_versions",
    ),
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/backfill",
        "Run the missing ticks of a window",
        v.BackfillResult,
        202,
        BackfillRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("jobs",),
        handler="backfill",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/ticks",
        "Every nominal tick and its fate",
        TickList,
        query=q.TicksQuery,
        errors=(404, 422),
        tags=("jobs",),
        handler="job_ticks",
    ),
    Operation(
        "get",
        "/api/v1/runs/{run_id}",
        "A run",
        v.Run,
        errors=(404,),
        tags=("runs",),
        handler="get_run",
    ),
    Operation(
        "get",
        "/api/v1/runs/{run_id}/output",
        "What a run printed (last 64 KiB)",
        v.RunOutput,
        errors=(404,),
        tags=("runs",),
        handler="get_output",
    ),
    Operation(
        "post",
        "/api/v1/runs/{run_id}/retry",
        "Send a dead-lettered run back",
        v.Run,
        201,
        errors=(404, 409, 422),
        tags=("runs",),
        handler="retry_run",
    ),
    Operation(
        "get",
        "/api/v1/dead-letter",
        "Dead-lettered runs, latest first",
        v.RunList,
        query=q.DeadLetterQuery,
        errors=(422,),
        tags=("runs",),
        handler="dead_letter",
    ),
    Operation(
        "post",
        "/api/v1/schedules/preview",
        "The next fire times of a schedule",
        v.SchedulePreview,
        body=SchedulePreviewRequest,
        errors=BODY_ERRORS,
        tags=("schedules",),
        handler="preview",
    ),
    Operation(
        "post",
        "/api/v1/dags",
        "Register a DAG",
        v.DagCreated,
        201,
        DagSpec,
        errors=(*BODY_ERRORS, 409),
        tags=("dags",),
        handler="create_dag",
    ),
    Operation(
        "get",
        "/api/v1/dags",
        "List DAGs, newest first",
        v.DagList,
        query=q.DagQuery,
        errors=(422,),
        tags=("dags",),
        handler="list_dags",
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}",
        "A DAG and its tasks",
        v.Dag,
        errors=(404,),
        tags=("dags",),
        handler="get_dag",
    ),
    Operation(
        "patch",
        "/api/v1/dags/{dag_id}",
        "Pause or resume a DAG",
        v.Dag,
        body=DagPatch,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("dags",),
        handler="patch_dag",
    ),
    Operation(
        "delete",
        "/api/v1/dags/{dag_id}",
        "Delete a DAG, keeping its history",
        v.Dag,
        errors=(404, 409),
        tags=("dags",),
        handler="delete_dag",
    ),
    Operation(
        "post",
        "/api/v1/dags/{dag_id}/trigger",
        "Open a DAG run now",
        v.DagTriggered,
        201,
        errors=(404, 409, 422),
        tags=("dags",),
        handler="trigger_dag",
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}/runs",
        "A DAG's runs, newest first",
        v.DagRunList,
        query=q.DagRunQuery,
        errors=(404, 422),
        tags=("dags",),
        handler="list_dag_runs",
    ),
    Operation(
        "get",
        "/api/v1/dags/{job_id}/ticks",
        "Every nominal tick of a DAG",
        TickList,
        query=q.TicksQuery,
        errors=(404, 422),
        tags=("dags",),
        handler="job_ticks",
    ),
    Operation(
        "get",
        "/api/v1/dag-runs/{dag_run_id}",
        "A DAG run: every task, every attempt",
        v.DagRun,
        errors=(404,),
        tags=("dags",),
        handler="get_dag_run",
    ),
    Operation(
        "get",
        "/api/v1/cluster",
        "Nodes and shard owners",
        ClusterView,
        tags=("operations",),
        handler="cluster",
    ),
    Operation(
        "get",
        "/api/v1/workers",
        "Live workers and their free slots",
        WorkerList,
        tags=("operations",),
        handler="workers",
    ),
    Operation(
        "post",
        "/internal/workers/{worker_id}/heartbeat",
        "Worker heartbeat",
        protocol.HeartbeatResponse,
        body=protocol.HeartbeatRequest,
        errors=BODY_ERRORS,
        tags=("worker protocol",),
        handler="worker_heartbeat",
    ),
    Operation(
        "post",
        "/internal/runs/claim",
        "Claim runs",
        protocol.ClaimResponse,
        body=protocol.ClaimRequest,
        errors=BODY_ERRORS,
        tags=("worker protocol",),
        handler="worker_claim",
    ),
    Operation(
        "post",
        "/internal/runs/{run_id}/lease/renew",
        "Renew a run's lease",
        protocol.RenewResponse,
        body=protocol.RenewRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("worker protocol",),
        handler="worker_renew",
    ),
    Operation(
        "post",
        "/internal/runs/{run_id}/complete",
        "Report a run's outcome",
        protocol.CompleteResponse,
        body=protocol.CompleteRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("worker protocol",),
        handler="worker_complete",
    ),
    Operation(
        "get",
        "/api/v1/status",
        "One screen of the deployment's health",
        Status,
        tags=("operations",),
        handler="status",
    ),
    Operation(
        "get",
        "/metrics",
        "Prometheus metrics (text exposition format)",
        None,
        tags=("operations",),
        handler="prometheus",
    ),
    Operation(
        "get", "/healthz", "The process is up", Health, tags=("operations",), handler="healthz"
    ),
    Operation(
        "get",
        "/readyz",
        "Every shard is owned by a live node (503 otherwise)",
        Readiness,
        tags=("operations",),
        handler="readyz",
    ),
)
