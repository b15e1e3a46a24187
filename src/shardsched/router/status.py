"""The deployment's state: the cluster, status and lag, the audit, Prometheus metrics,
health and readiness."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.views import LagHistory
from shardsched.ops.deployment import lag_history as lag_ops
from shardsched.ops.deployment.cluster import ClusterView, cluster_view
from shardsched.ops.deployment.status import Status, status_view
from shardsched.ops.history import audit as audit_ops
from shardsched.ops.history.audit import AuditReport
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import unbound
from shardsched.router.operation import Operation
from shardsched.router.schemas import AuditQuery, Health, LagQuery, Readiness
from shardsched.router.server import STOPPING_KEY
from shardsched.runtime.metrics import refresh_cluster


async def cluster(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(cluster_view(cx.dep)))


async def audit(cx: Context, request: Request) -> Response:
    """The audit over the whole deployment (the ledger and the timers; heavy on a big
    one: it reads every job's history)."""
    unbound(request)
    q: AuditQuery = http.query(request, AuditQuery)
    op = audit_ops.audit(
        cx.dep,
        q.settle_s,
        q.late_after_s,
        stranded_after_s=q.stranded_after_s,
        reference=q.reference,
    )
    return http.json_response(await cx.run(op))


async def status(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(status_view(cx.dep)))


async def lag_history(cx: Context, request: Request) -> Response:
    unbound(request)  # every node's lag: a cluster-wide view
    q: LagQuery = http.query(request, LagQuery)
    op = lag_ops.lag_history(cx.dep, http.ms(q.since), http.ms(q.until))
    return http.json_response(await cx.run(op))


async def prometheus(cx: Context, request: Request) -> Response:
    """This process's series, and the cluster's state read from Redis now."""
    try:
        refresh_cluster(cx.metrics, await cx.run(status_view(cx.dep)))
    except http.ApiError:
        pass  # Redis unreachable: still export what this process counted
    body, content_type = cx.metrics.render()
    return Response(body, media_type=content_type)


async def healthz(cx: Context, request: Request) -> Response:
    return http.json_response(Health(status="ok"))


async def readyz(cx: Context, request: Request) -> Response:
    """Ready when every shard is owned by a live node and this process is not stopping
    (a load balancer then sends it nothing new while it drains); says which and by
    whom."""
    view: ClusterView = await cx.run(cluster_view(cx.dep))
    live = {n.node_id for n in view.nodes}
    unowned = [s.shard for s in view.shards if s.owner not in live]
    body = Readiness(
        ready=not unowned,
        shards=len(view.shards),
        owned=len(view.shards) - len(unowned),
        unowned=unowned,
        owners={str(s.shard): s.owner for s in view.shards if s.owner in live},
        redis=cx.redis.describe(),
    )
    stopping = request.scope.get("state", {}).get(STOPPING_KEY)
    if stopping is not None and stopping.is_set():
        body.ready, body.stopping = False, True
    return http.json_response(body, 200 if body.ready else 503)


ROUTES: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/cluster",
        "Nodes and shard owners",
        ClusterView,
        tags=("operations",),
        handler=cluster,
        operation_id="get_cluster",
    ),
    Operation(
        "get",
        "/api/v1/audit",
        "Account for every tick of every job: fired once, skipped, pending or missing",
        AuditReport,
        query=AuditQuery,
        errors=(422,),
        tags=("operations",),
        handler=audit,
        operation_id="run_audit",
    ),
    Operation(
        "get",
        "/api/v1/status",
        "One screen of the deployment's health",
        Status,
        tags=("operations",),
        handler=status,
        operation_id="get_status",
    ),
    Operation(
        "get",
        "/api/v1/status/lag",
        "Each node's trigger lag p50/p99 over time (a sample every 15 s, kept a day)",
        LagHistory,
        query=LagQuery,
        errors=(422,),
        tags=("operations",),
        handler=lag_history,
        operation_id="get_lag_history",
    ),
    Operation(
        "get",
        "/metrics",
        "Prometheus metrics (text exposition format)",
        None,
        tags=("operations",),
        handler=prometheus,
        operation_id="get_metrics",
        scope=None,  # or read, with --metrics-auth
    ),
    Operation(
        "get",
        "/healthz",
        "The process is up",
        Health,
        tags=("operations",),
        handler=healthz,
        operation_id="get_health",
        scope=None,
    ),
    Operation(
        "get",
        "/readyz",
        "Every shard is owned by a live node (503 otherwise)",
        Readiness,
        tags=("operations",),
        handler=readyz,
        operation_id="get_readiness",
        scope=None,
    ),
)
