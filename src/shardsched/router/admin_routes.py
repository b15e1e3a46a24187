"""The operations side of the route table: health, readiness, metrics, status, the
cluster, API tokens and the internal worker protocol (:mod:`.routes` holds the rest)."""

from __future__ import annotations

from shardsched.core.access import Scope, TokenCreated, TokenList, TokenRequest
from shardsched.ops import protocol
from shardsched.ops.audit import AuditReport
from shardsched.ops.cluster import ClusterView, WorkerList
from shardsched.ops.status import Status
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import AuditQuery, Health, Readiness

ADMIN_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/cluster",
        "Nodes and shard owners",
        ClusterView,
        tags=("operations",),
        handler="cluster",
        operation_id="get_cluster",
    ),
    Operation(
        "get",
        "/api/v1/workers",
        "Live workers and their free slots",
        WorkerList,
        tags=("operations",),
        handler="workers",
        operation_id="list_workers",
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
        "/api/v1/audit",
        "Account for every tick of every job: fired once, skipped, pending or missing",
        AuditReport,
        query=AuditQuery,
        errors=(422,),
        tags=("operations",),
        handler="audit",
        operation_id="run_audit",
    ),
    Operation(
        "get",
        "/api/v1/status",
        "One screen of the deployment's health",
        Status,
        tags=("operations",),
        handler="status",
        operation_id="get_status",
    ),
    Operation(
        "get",
        "/metrics",
        "Prometheus metrics (text exposition format)",
        None,
        tags=("operations",),
        handler="prometheus",
        operation_id="get_metrics",
        scope=None,  # or read, with --metrics-auth
    ),
    Operation(
        "get",
        "/healthz",
        "The process is up",
        Health,
        tags=("operations",),
        handler="healthz",
        operation_id="get_health",
        scope=None,
    ),
    Operation(
        "get",
        "/readyz",
        "Every shard is owned by a live node (503 otherwise)",
        Readiness,
        tags=("operations",),
        handler="readyz",
        operation_id="get_readiness",
        scope=None,
    ),
    Operation(
        "post",
        "/api/v1/tokens",
        "Create an API token (its secret is shown once)",
        TokenCreated,
        201,
        TokenRequest,
        errors=(*BODY_ERRORS, 409),
        tags=("tokens",),
        handler="create_token",
        scope=Scope.ADMIN,
    ),
    Operation(
        "get",
        "/api/v1/tokens",
        "API tokens (names, scopes, teams; never a secret)",
        TokenList,
        tags=("tokens",),
        handler="list_tokens",
        scope=Scope.ADMIN,
    ),
    Operation(
        "delete",
        "/api/v1/tokens/{name}",
        "Revoke a token: refused on its next request",
        None,
        errors=(404,),
        tags=("tokens",),
        handler="revoke_token",
        scope=Scope.ADMIN,
    ),
)
