"""The HTTP API (``/api/v1``): a thin starlette shell over :mod:`shardsched.ops`.

Stateless: every request routes by id to its shard and runs the same operations (and Lua
scripts) the SDK runs. Bodies are decoded by the msgspec Structs of
:mod:`shardsched.core.models`; anything invalid is answered before a single write, with the
error shape of DESIGN §4.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from shardsched import ops
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.errors import (
    AlreadyRetried,
    ConflictError,
    DagNotFound,
    DagRunNotFound,
    Forbidden,
    JobNotFound,
    NotFoundError,
    RunNotFound,
    ValidationError,
)
from shardsched.core.models import (
    BackfillRequest,
    DagPatch,
    DagSpec,
    JobPatch,
    JobSpec,
    JobStatus,
    SchedulePreviewRequest,
)
from shardsched.core.views import JobCreated
from shardsched.ops import access, audit, listing, protocol, tokens
from shardsched.ops import dags as dag_ops
from shardsched.ops.cluster import ClusterView, cluster_view, list_workers
from shardsched.ops.preview import preview_schedule
from shardsched.ops.status import status_view
from shardsched.router import http
from shardsched.router.guards import AccessPolicy, Gate, unbound, who
from shardsched.router.openapi import openapi_document
from shardsched.router.routes import OPERATIONS
from shardsched.router.schemas import (
    DagQuery,
    DagRunQuery,
    DeadLetterQuery,
    Health,
    JobQuery,
    Readiness,
    RunQuery,
    TicksQuery,
    opt,
)
from shardsched.runtime.metrics import Metrics, refresh_cluster
from shardsched.store.redis import Redis

log = logging.getLogger(__name__)
MAX_BODY = 1024 * 1024
_encoder = msgspec.json.Encoder()
_spec_decoder = msgspec.json.Decoder(JobSpec)
_patch_decoder = msgspec.json.Decoder(JobPatch)
_dag_decoder = msgspec.json.Decoder(DagSpec)
_dag_patch_decoder = msgspec.json.Decoder(DagPatch)
_preview_decoder = msgspec.json.Decoder(SchedulePreviewRequest)
_backfill_decoder = msgspec.json.Decoder(BackfillRequest)
_heartbeat_decoder = msgspec.json.Decoder(protocol.HeartbeatRequest)
_claim_decoder = msgspec.json.Decoder(protocol.ClaimRequest)
_renew_decoder = msgspec.json.Decoder(protocol.RenewRequest)
_complete_decoder = msgspec.json.Decoder(protocol.CompleteRequest)
_token_decoder = msgspec.json.Decoder(TokenRequest)
_AT_PATH = re.compile(r" - at `(\$[^`]*)`$")
_NAMED_FIELD = re.compile(r"Object (?:missing required|contains unknown) field `([^`]+)`")


class Api:
    """The routes, bound to one Redis pool and one deployment."""

    def __init__(self, redis: Redis, dep: ops.Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics

    async def _run(self, op: ops.Op) -> Any:
        try:
            return await http.drive_off_loop(op, self.redis)
        except ValidationError as exc:  # ours first: it is a msgspec.ValidationError too
            raise http.validation(exc.message, exc.field) from None
        except msgspec.ValidationError as exc:
            raise http.validation(str(exc)) from None
        except NotFoundError as exc:
            raise http.ApiError(404, "not_found", str(exc)) from None
        except AlreadyRetried as exc:
            details = {"run_id": exc.run_id, "next_run_id": exc.next_run_id}
            raise http.ApiError(409, "already_retried", str(exc), details) from None
        except ConflictError as exc:
            raise http.ApiError(409, "conflict", str(exc)) from None
        except Forbidden as exc:
            raise http.ApiError(403, "forbidden", str(exc)) from None

    async def _visible(self, request: Request, any_id: str, missing: NotFoundError) -> None:
        """404 (as for an unknown id) unless the caller's team owns ``any_id``."""
        await self._run(access.require_visible(self.dep, who(request), any_id, missing))

    async def _job(self, request: Request) -> str:
        job_id: str = request.path_params["job_id"]
        await self._visible(request, job_id, JobNotFound(job_id))
        return job_id

    async def _dag(self, request: Request) -> str:
        dag_id: str = request.path_params["dag_id"]
        await self._visible(request, dag_id, DagNotFound(dag_id))
        return dag_id

    async def _run_id(self, request: Request) -> str:
        rid: str = request.path_params["run_id"]
        await self._visible(request, rid, RunNotFound(rid))
        return rid

    async def create_job(self, request: Request) -> Response:
        spec = await http.decode(request, _spec_decoder)
        access.require_name(who(request), spec.name)
        created: JobCreated = await self._run(ops.create_job(self.dep, spec))
        return http.json_response(created, 201)

    async def get_job(self, request: Request) -> Response:
        return http.json_response(await self._run(ops.get_job(self.dep, await self._job(request))))

    async def patch_job(self, request: Request) -> Response:
        patch = await http.decode(request, _patch_decoder)
        job_id = await self._job(request)
        if patch.name is not None:
            access.require_name(who(request), patch.name)
        return http.json_response(await self._run(ops.patch_job(self.dep, job_id, patch)))

    async def delete_job(self, request: Request) -> Response:
        job_id = await self._job(request)
        return http.json_response(await self._run(ops.delete_job(self.dep, job_id)))

    async def trigger(self, request: Request) -> Response:
        job_id = await self._job(request)
        await http.no_body(request)
        return http.json_response(await self._run(ops.trigger(self.dep, job_id)), 201)

    async def list_jobs(self, request: Request) -> Response:
        q: JobQuery = http.query(request, JobQuery)
        within = who(request).prefixes
        op = listing.jobs_page(
            self.dep, q.limit, *http.cursor(q), opt(q.status), opt(q.name_prefix), within
        )
        return http.json_response(await self._run(op))

    async def list_runs(self, request: Request) -> Response:
        q: RunQuery = http.query(request, RunQuery)
        job_id = await self._job(request)
        op = listing.runs_page(
            self.dep,
            job_id,
            q.limit,
            *http.cursor(q),
            opt(q.state),
            http.ms(q.since),
            http.ms(q.until),
        )
        return http.json_response(await self._run(op))

    async def backfill(self, request: Request) -> Response:
        body = await http.decode(request, _backfill_decoder)
        job_id = await self._job(request)
        return http.json_response(await self._run(ops.backfill(self.dep, job_id, body)), 202)

    async def job_versions(self, request: Request) -> Response:
        job_id = await self._job(request)
        return http.json_response(await self._run(ops.job_versions(self.dep, job_id)))

    async def get_run(self, request: Request) -> Response:
        return http.json_response(
            await self._run(ops.get_run(self.dep, await self._run_id(request)))
        )

    async def get_output(self, request: Request) -> Response:
        rid = await self._run_id(request)
        return http.json_response(await self._run(ops.get_output(self.dep, rid)))

    async def job_ticks(self, request: Request) -> Response:
        """Every nominal tick of the job in [from, to] and what became of it."""
        q: TicksQuery = http.query(request, TicksQuery)
        job_id = await self._job(request)
        op = audit.job_ticks(self.dep, job_id, http.ms(q.from_), http.ms(q.to), q.limit)
        return http.json_response(await self._run(op))

    async def create_dag(self, request: Request) -> Response:
        spec = await http.decode(request, _dag_decoder)
        access.require_name(who(request), spec.name)
        return http.json_response(await self._run(dag_ops.create_dag(self.dep, spec)), 201)

    async def list_dags(self, request: Request) -> Response:
        q: DagQuery = http.query(request, DagQuery)
        within = who(request).prefixes
        op = listing.dags_page(
            self.dep, q.limit, *http.cursor(q), opt(q.status), opt(q.name_prefix), within
        )
        return http.json_response(await self._run(op))

    async def get_dag(self, request: Request) -> Response:
        dag_id = await self._dag(request)
        return http.json_response(await self._run(dag_ops.get_dag(self.dep, dag_id)))

    async def patch_dag(self, request: Request) -> Response:
        patch = await http.decode(request, _dag_patch_decoder)
        if patch.status == JobStatus.DELETED:
            raise http.validation("use DELETE to delete a DAG", "$.status")
        dag_id = await self._dag(request)
        return http.json_response(
            await self._run(dag_ops.set_dag_status(self.dep, dag_id, patch.status))
        )

    async def delete_dag(self, request: Request) -> Response:
        dag_id = await self._dag(request)
        return http.json_response(await self._run(dag_ops.delete_dag(self.dep, dag_id)))

    async def trigger_dag(self, request: Request) -> Response:
        dag_id = await self._dag(request)
        await http.no_body(request)
        return http.json_response(await self._run(dag_ops.trigger_dag(self.dep, dag_id)), 201)

    async def list_dag_runs(self, request: Request) -> Response:
        q: DagRunQuery = http.query(request, DagRunQuery)
        dag_id = await self._dag(request)
        op = listing.dag_runs_page(
            self.dep, dag_id, q.limit, *http.cursor(q), http.ms(q.since), http.ms(q.until)
        )
        return http.json_response(await self._run(op))

    async def get_dag_run(self, request: Request) -> Response:
        drid = request.path_params["dag_run_id"]
        await self._visible(request, drid, DagRunNotFound(drid))
        return http.json_response(await self._run(dag_ops.get_dag_run(self.dep, drid)))

    async def preview(self, request: Request) -> Response:
        body = await http.decode(request, _preview_decoder)
        return http.json_response(await self._run(preview_schedule(body)))

    async def cluster(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(cluster_view(self.dep)))

    async def dead_letter(self, request: Request) -> Response:
        q: DeadLetterQuery = http.query(request, DeadLetterQuery)
        within = who(request).prefixes
        op = listing.dead_letter_page(self.dep, q.limit, *http.cursor(q), within)
        return http.json_response(await self._run(op))

    async def retry_run(self, request: Request) -> Response:
        rid = await self._run_id(request)
        await http.no_body(request)
        return http.json_response(await self._run(ops.retry_run(self.dep, rid)), 201)

    async def workers(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(list_workers(self.dep)))

    async def worker_heartbeat(self, request: Request) -> Response:
        worker_id = request.path_params["worker_id"]
        body = await http.decode(request, _heartbeat_decoder)
        return http.json_response(await self._run(protocol.heartbeat(self.dep, worker_id, body)))

    async def worker_claim(self, request: Request) -> Response:
        body = await http.decode(request, _claim_decoder)
        return http.json_response(await self._run(protocol.claim(self.dep, body)))

    async def worker_renew(self, request: Request) -> Response:
        body = await http.decode(request, _renew_decoder)
        rid = request.path_params["run_id"]
        return http.json_response(await self._run(protocol.renew(self.dep, rid, body)))

    async def worker_complete(self, request: Request) -> Response:
        body = await http.decode(request, _complete_decoder)
        rid = request.path_params["run_id"]
        return http.json_response(await self._run(protocol.complete(self.dep, rid, body)))

    async def healthz(self, request: Request) -> Response:
        return http.json_response(Health(status="ok"))

    async def readyz(self, request: Request) -> Response:
        """Ready when every shard is owned by a live node; says which and by whom."""
        view: ClusterView = await self._run(cluster_view(self.dep))
        live = {n.node_id for n in view.nodes}
        unowned = [s.shard for s in view.shards if s.owner not in live]
        body = Readiness(
            ready=not unowned,
            shards=len(view.shards),
            owned=len(view.shards) - len(unowned),
            unowned=unowned,
            owners={str(s.shard): s.owner for s in view.shards if s.owner in live},
        )
        return http.json_response(body, 200 if not unowned else 503)

    async def status(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(status_view(self.dep)))

    async def prometheus(self, request: Request) -> Response:
        """This process's series, and the cluster's state read from Redis now."""
        try:
            refresh_cluster(self.metrics, await self._run(status_view(self.dep)))
        except http.ApiError:
            pass  # Redis unreachable: still export what this process counted
        body, content_type = self.metrics.render()
        return Response(body, media_type=content_type)

    async def openapi(self, request: Request) -> Response:
        return http.json_response(openapi_document())

    async def create_token(self, request: Request) -> Response:
        unbound(request)
        body = await http.decode(request, _token_decoder)
        op = tokens.create_token(self.dep, body, who(request).name)
        return http.json_response(await self._run(op), 201)

    async def list_tokens(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(tokens.list_tokens(self.dep)))

    async def revoke_token(self, request: Request) -> Response:
        unbound(request)
        name = request.path_params["name"]
        return http.json_response(await self._run(tokens.revoke_token(self.dep, name)))


def create_app(
    redis: Redis,
    dep: ops.Deployment,
    metrics: Metrics | None = None,
    policy: AccessPolicy | None = None,
) -> Starlette:
    """The API of a node (whose metrics it exports) or of a router (metrics of its own).
    ``policy``: who may call it (default: a token on every route but health and metrics,
    loopback Host names only)."""
    api = Api(redis, dep, metrics or Metrics())
    policy = policy or AccessPolicy()
    gate = Gate(policy, redis, dep)

    def gated(handler: Callable[[Request], Any], needed: Scope | None) -> Callable[..., Any]:
        async def endpoint(request: Request) -> Response:
            request.state.principal = await gate.principal(request, needed)
            response: Response = await handler(request)
            return response

        return endpoint

    by_path: dict[str, dict[str, Callable[[Request], Any]]] = {}
    for op in OPERATIONS:
        needed = op.needed()
        if op.handler == "prometheus" and policy.metrics_auth:
            needed = Scope.READ
        by_path.setdefault(op.path, {})[op.method] = gated(getattr(api, op.handler), needed)
    routes = [http.route(path, **handlers) for path, handlers in by_path.items()]
    routes.append(http.route("/openapi.json", get=gated(api.openapi, None)))

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        name = "method_not_allowed" if code == 405 else "not_found"
        response = http.error_response(
            http.ApiError(code, name, f"{request.method} {request.url.path}")
        )
        response.headers.update(getattr(exc, "headers", None) or {})  # 405: Allow
        return response

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
