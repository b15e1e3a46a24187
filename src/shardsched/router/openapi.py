"""The OpenAPI 3.1 document of the HTTP API, generated from the msgspec Structs.

The request and response bodies and the query strings are the very Structs the routes
decode and encode (:mod:`shardsched.core.models`, :mod:`shardsched.router.schemas`), so the
document cannot drift from the code; :data:`OPERATIONS` lists each route once with its
body, query, answer and the error statuses it can give.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import msgspec

from shardsched._version import __version__
from shardsched.core.models import (
    BackfillRequest,
    DagPatch,
    DagSpec,
    JobPatch,
    JobSpec,
    SchedulePreviewRequest,
)
from shardsched.core.views import (
    BackfillResult,
    Dag,
    DagCreated,
    DagList,
    DagRun,
    DagRunList,
    DagTriggered,
    Job,
    JobCreated,
    JobList,
    JobVersions,
    Run,
    RunList,
    RunOutput,
    SchedulePreview,
    Triggered,
)
from shardsched.ops import protocol
from shardsched.ops.audit import TickList
from shardsched.ops.cluster import ClusterView, WorkerList
from shardsched.ops.status import Status
from shardsched.router import schemas as q


class ErrorDetail(msgspec.Struct):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorBody(msgspec.Struct):
    """Every error answer: ``{"error": {"code", "message", "details"}}`` (DESIGN §4)."""

    error: ErrorDetail


class Health(msgspec.Struct):
    status: str


class Readiness(msgspec.Struct):
    ready: bool
    shards: int
    owned: int
    unowned: list[int]
    owners: dict[str, str]


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


BODY_ERRORS = (400, 413, 422)
OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/jobs",
        "Register a job",
        JobCreated,
        201,
        JobSpec,
        errors=(*BODY_ERRORS, 409),
        tags=("jobs",),
    ),
    Operation(
        "get",
        "/api/v1/jobs",
        "List jobs, newest first",
        JobList,
        query=q.JobQuery,
        errors=(422,),
        tags=("jobs",),
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}",
        "A job: definition, status, next run",
        Job,
        errors=(404,),
        tags=("jobs",),
    ),
    Operation(
        "patch",
        "/api/v1/jobs/{job_id}",
        "Change, pause or resume a job",
        Job,
        body=JobPatch,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("jobs",),
    ),
    Operation(
        "delete",
        "/api/v1/jobs/{job_id}",
        "Delete a job, keeping its history",
        Job,
        errors=(404, 409),
        tags=("jobs",),
    ),
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/trigger",
        "Run a job now",
        Triggered,
        201,
        errors=(404, 409, 422),
        tags=("jobs",),
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/runs",
        "A job's runs, newest first",
        RunList,
        query=q.RunQuery,
        errors=(404, 422),
        tags=("runs",),
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/versions",
        "A job's definitions over time",
        JobVersions,
        errors=(404, 409),
        tags=("jobs",),
    ),
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/backfill",
        "Run the missing ticks of a window",
        BackfillResult,
        202,
        BackfillRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("jobs",),
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/ticks",
        "Every nominal tick and its fate",
        TickList,
        query=q.TicksQuery,
        errors=(404, 422),
        tags=("jobs",),
    ),
    Operation("get", "/api/v1/runs/{run_id}", "A run", Run, errors=(404,), tags=("runs",)),
    Operation(
        "get",
        "/api/v1/runs/{run_id}/output",
        "What a run printed (last 64 KiB)",
        RunOutput,
        errors=(404,),
        tags=("runs",),
    ),
    Operation(
        "post",
        "/api/v1/runs/{run_id}/retry",
        "Send a dead-lettered run back",
        Run,
        201,
        errors=(404, 409, 422),
        tags=("runs",),
    ),
    Operation(
        "get",
        "/api/v1/dead-letter",
        "Dead-lettered runs, latest first",
        RunList,
        query=q.DeadLetterQuery,
        errors=(422,),
        tags=("runs",),
    ),
    Operation(
        "post",
        "/api/v1/schedules/preview",
        "The next fire times of a schedule",
        SchedulePreview,
        body=SchedulePreviewRequest,
        errors=BODY_ERRORS,
        tags=("schedules",),
    ),
    Operation(
        "post",
        "/api/v1/dags",
        "Register a DAG",
        DagCreated,
        201,
        DagSpec,
        errors=(*BODY_ERRORS, 409),
        tags=("dags",),
    ),
    Operation(
        "get",
        "/api/v1/dags",
        "List DAGs, newest first",
        DagList,
        query=q.DagQuery,
        errors=(422,),
        tags=("dags",),
    ),
    Operation(
        "get", "/api/v1/dags/{dag_id}", "A DAG and its tasks", Dag, errors=(404,), tags=("dags",)
    ),
    Operation(
        "patch",
        "/api/v1/dags/{dag_id}",
        "Pause or resume a DAG",
        Dag,
        body=DagPatch,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("dags",),
    ),
    Operation(
        "delete",
        "/api/v1/dags/{dag_id}",
        "Delete a DAG, keeping its history",
        Dag,
        errors=(404, 409),
        tags=("dags",),
    ),
    Operation(
        "post",
        "/api/v1/dags/{dag_id}/trigger",
        "Open a DAG run now",
        DagTriggered,
        201,
        errors=(404, 409, 422),
        tags=("dags",),
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}/runs",
        "A DAG's runs, newest first",
        DagRunList,
        query=q.DagRunQuery,
        errors=(404, 422),
        tags=("dags",),
    ),
    Operation(
        "get",
        "/api/v1/dags/{job_id}/ticks",
        "Every nominal tick of a DAG",
        TickList,
        query=q.TicksQuery,
        errors=(404, 422),
        tags=("dags",),
    ),
    Operation(
        "get",
        "/api/v1/dag-runs/{dag_run_id}",
        "A DAG run: every task, every attempt",
        DagRun,
        errors=(404,),
        tags=("dags",),
    ),
    Operation(
        "get", "/api/v1/cluster", "Nodes and shard owners", ClusterView, tags=("operations",)
    ),
    Operation(
        "get",
        "/api/v1/workers",
        "Live workers and their free slots",
        WorkerList,
        tags=("operations",),
    ),
    Operation(
        "post",
        "/internal/workers/{worker_id}/heartbeat",
        "Worker heartbeat",
        protocol.HeartbeatResponse,
        body=protocol.HeartbeatRequest,
        errors=BODY_ERRORS,
        tags=("worker protocol",),
    ),
    Operation(
        "post",
        "/internal/runs/claim",
        "Claim runs",
        protocol.ClaimResponse,
        body=protocol.ClaimRequest,
        errors=BODY_ERRORS,
        tags=("worker protocol",),
    ),
    Operation(
        "post",
        "/internal/runs/{run_id}/lease/renew",
        "Renew a run's lease",
        protocol.RenewResponse,
        body=protocol.RenewRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("worker protocol",),
    ),
    Operation(
        "post",
        "/internal/runs/{run_id}/complete",
        "Report a run's outcome",
        protocol.CompleteResponse,
        body=protocol.CompleteRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("worker protocol",),
    ),
    Operation(
        "get",
        "/api/v1/status",
        "One screen of the deployment's health",
        Status,
        tags=("operations",),
    ),
    Operation(
        "get", "/metrics", "Prometheus metrics (text exposition format)", None, tags=("operations",)
    ),
    Operation("get", "/healthz", "The process is up", Health, tags=("operations",)),
    Operation(
        "get",
        "/readyz",
        "Every shard is owned by a live node (503 otherwise)",
        Readiness,
        tags=("operations",),
    ),
)

_ERROR_TEXT = {
    400: "The body is not valid JSON",
    404: "No such resource",
    409: "Conflicts with the current state (deleted, not dead-lettered, a DAG's task…)",
    413: "The body is over 1 MiB",
    422: "Invalid input; details.field names it as a $.path",
    503: "Redis is unavailable, or (readyz) not every shard is owned",
}
_REF = "#/components/schemas/{name}"


def _json(ref: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": ref}}}


def _not_null(prop: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent or a string, never JSON null: drop that alternative."""
    prop = {k: v for k, v in prop.items() if not (k == "default" and v is None)}
    options = [o for o in prop.pop("anyOf", []) if o != {"type": "null"}]
    if len(options) == 1:
        prop.update(options[0])
    elif options:
        prop["anyOf"] = options
    return prop


@cache
def openapi_document() -> dict[str, Any]:
    """The whole document (computed once per process)."""
    types: list[Any] = [ErrorBody]
    for op in OPERATIONS:
        types += [t for t in (op.answer, op.body, op.query) if t is not None]
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    ref_of = dict(zip(types, refs, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        item: dict[str, Any] = {
            "summary": op.summary,
            "operationId": f"{op.method}_{op.path.strip('/').replace('/', '_')}".replace(
                "{", ""
            ).replace("}", ""),
            "tags": list(op.tags),
            "responses": {
                str(op.status): {
                    "description": op.summary,
                    **(
                        _json(ref_of[op.answer])
                        if op.answer is not None
                        else {"content": {"text/plain": {"schema": {"type": "string"}}}}
                    ),
                }
            },
        }
        for status in sorted({*op.errors, 503}):
            item["responses"][str(status)] = {
                "description": _ERROR_TEXT[status],
                **_json(ref_of[ErrorBody] if op.path != "/readyz" else ref_of[op.answer]),
            }
        if op.path == "/readyz":
            item["responses"]["503"]["description"] = "Not every shard is owned by a live node"
        params = [
            {"name": name[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
            for name in op.path.split("/")
            if name.startswith("{")
        ]
        if op.query is not None:
            schema = components[op.query.__name__]
            params += [
                {"name": name, "in": "query", "required": False, "schema": _not_null(prop)}
                for name, prop in schema["properties"].items()
            ]
        if params:
            item["parameters"] = params
        if op.body is not None:
            item["requestBody"] = {"required": True, **_json(ref_of[op.body])}
        paths.setdefault(op.path, {})[op.method] = item
    for query in {op.query for op in OPERATIONS if op.query is not None}:
        components.pop(query.__name__, None)  # described as parameters, not a schema
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "shardsched",
            "version": __version__,
            "description": "A distributed cron and DAG scheduler: the HTTP API (DESIGN §4).",
        },
        "paths": paths,
        "components": {"schemas": components},
    }
