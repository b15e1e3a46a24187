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
from contextlib import aclosing
from typing import Any

import msgspec
import trio
from msgspec import UNSET
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shardsched import ops
from shardsched.core.errors import (
    AlreadyRetried,
    ConflictError,
    NotFoundError,
    RedisUnavailable,
    ValidationError,
)
from shardsched.core.instants import to_ms
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
from shardsched.ops import audit, listing, protocol
from shardsched.ops import dags as dag_ops
from shardsched.ops.cluster import ClusterView, cluster_view, list_workers
from shardsched.ops.pagination import Cursor, parse_cursor
from shardsched.ops.preview import preview_schedule
from shardsched.ops.status import status_view
from shardsched.router.openapi import Health, Readiness, openapi_document
from shardsched.router.schemas import (
    DagQuery,
    DagRunQuery,
    DeadLetterQuery,
    JobQuery,
    RunQuery,
    TicksQuery,
    opt,
)
from shardsched.runtime.metrics import Metrics, refresh_cluster
from shardsched.store.redis import Redis, RedisConnectionError

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
_AT_PATH = re.compile(r" - at `(\$[^`]*)`$")
_NAMED_FIELD = re.compile(r"Object (?:missing required|contains unknown) field `([^`]+)`")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def json_response(body: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(body), status_code=status, media_type="application/json")


#: Seconds a client is told to wait when Redis refuses writes or cannot be reached.
RETRY_AFTER_S = 1


def error_response(err: ApiError) -> Response:
    body = {"error": {"code": err.code, "message": err.message, "details": err.details}}
    response = json_response(body, err.status)
    if err.status == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


def _validation(message: str, field: str | None = None) -> ApiError:
    """A 422 naming the offending field as a $.path (msgspec's ``- at `$.x``` suffix, or
    the missing / unknown field itself)."""
    if "matching regex '^[^\\x00" in message:  # models.Name's pattern: say it plainly
        message = re.sub(
            r"Expected `str` matching regex '.*?'",
            "names may not hold control or invisible format characters",
            message,
        )
    if field is None:
        field = "$"
        if m := _AT_PATH.search(message):
            field, message = m.group(1), message[: m.start()]
        if m := _NAMED_FIELD.match(message):
            field = f"{field}.{m.group(1)}"
    return ApiError(422, "validation_error", message, {"field": field})


async def _decode(request: Request, decoder: msgspec.json.Decoder[Any]) -> Any:
    return _decode_bytes(await _read_body(request), decoder)


async def _read_body(request: Request) -> bytes:
    """The body, refused with a 413 as soon as it passes MAX_BODY."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY:
        raise ApiError(413, "body_too_large", f"request body over {MAX_BODY} bytes")
    body = b""
    async with aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > MAX_BODY:
                raise ApiError(413, "body_too_large", f"request body over {MAX_BODY} bytes")
    return body


def _decode_bytes(body: bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise _validation(str(exc)) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, "malformed_json", f"body is not valid JSON: {exc}") from None


class NoBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of a POST that takes none: empty, or ``{}``; any field is a 422."""


_no_body_decoder = msgspec.json.Decoder(NoBody)


async def _no_body(request: Request) -> None:
    """Decode a body that must be empty (or ``{}``) like every other body."""
    body = await _read_body(request)
    if body.strip():
        _decode_bytes(body, _no_body_decoder)


def _query(request: Request, schema: type[Any]) -> Any:
    """The query string decoded into its Struct; a 422 names a bad or unknown parameter."""
    items = request.query_params.multi_items()
    names = [name for name, _ in items]
    for name in names:
        if names.count(name) > 1:
            raise _validation(f"query parameter {name!r} is given more than once", f"$.{name}")
    try:
        return msgspec.convert(dict(items), schema, strict=False)
    except msgspec.ValidationError as exc:
        raise _validation(str(exc)) from None


def _cursor(query: Any) -> tuple[Cursor | None]:
    try:
        return (parse_cursor(opt(query.cursor)),)
    except ValidationError as exc:
        raise _validation(exc.message, exc.field) from None


def _ms(when: Any) -> int | None:
    return None if when is None or when is UNSET else to_ms(when)


def _advance(op: ops.Op, replies: list[Any] | None) -> tuple[bool, Any]:
    """One step of an operation: (False, its next calls) or (True, its result)."""
    try:
        return False, (next(op) if replies is None else op.send(replies))
    except StopIteration as stop:
        return True, stop.value


async def drive_off_loop(op: ops.Op, redis: Redis) -> Any:
    """:func:`ops.drive_async`, with each of the operation's pure steps in a worker thread.

    The API shares its trio loop with the node's shard actors: a heavy step (enumerating
    ticks, a 10,000-tick backfill, validating a dense DAG, a long preview) run on the loop
    would hold up lease renewals and firing for as long as it takes. In a thread it only
    shares the GIL, which the loop gets back every switch interval (5 ms)."""
    done, value = await trio.to_thread.run_sync(_advance, op, None)
    while not done:
        replies = await ops.redis_calls(redis, value)
        done, value = await trio.to_thread.run_sync(_advance, op, replies)
    return value


class Api:
    """The routes, bound to one Redis pool and one deployment."""

    def __init__(self, redis: Redis, dep: ops.Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics

    async def _run(self, op: ops.Op) -> Any:
        try:
            return await drive_off_loop(op, self.redis)
        except ValidationError as exc:  # ours first: it is a msgspec.ValidationError too
            raise _validation(exc.message, exc.field) from None
        except msgspec.ValidationError as exc:
            raise _validation(str(exc)) from None
        except NotFoundError as exc:
            raise ApiError(404, "not_found", str(exc)) from None
        except AlreadyRetried as exc:
            details = {"run_id": exc.run_id, "next_run_id": exc.next_run_id}
            raise ApiError(409, "already_retried", str(exc), details) from None
        except ConflictError as exc:
            raise ApiError(409, "conflict", str(exc)) from None

    async def create_job(self, request: Request) -> Response:
        spec = await _decode(request, _spec_decoder)
        created: JobCreated = await self._run(ops.create_job(self.dep, spec))
        return json_response(created, 201)

    async def get_job(self, request: Request) -> Response:
        return json_response(await self._run(ops.get_job(self.dep, request.path_params["job_id"])))

    async def patch_job(self, request: Request) -> Response:
        patch = await _decode(request, _patch_decoder)
        job_id = request.path_params["job_id"]
        return json_response(await self._run(ops.patch_job(self.dep, job_id, patch)))

    async def delete_job(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        return json_response(await self._run(ops.delete_job(self.dep, job_id)))

    async def trigger(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        await _no_body(request)
        return json_response(await self._run(ops.trigger(self.dep, job_id)), 201)

    async def list_jobs(self, request: Request) -> Response:
        q: JobQuery = _query(request, JobQuery)
        op = listing.jobs_page(self.dep, q.limit, *_cursor(q), opt(q.status), opt(q.name_prefix))
        return json_response(await self._run(op))

    async def list_runs(self, request: Request) -> Response:
        q: RunQuery = _query(request, RunQuery)
        job_id = request.path_params["job_id"]
        op = listing.runs_page(
            self.dep, job_id, q.limit, *_cursor(q), opt(q.state), _ms(q.since), _ms(q.until)
        )
        return json_response(await self._run(op))

    async def backfill(self, request: Request) -> Response:
        body = await _decode(request, _backfill_decoder)
        job_id = request.path_params["job_id"]
        return json_response(await self._run(ops.backfill(self.dep, job_id, body)), 202)

    async def job_versions(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        return json_response(await self._run(ops.job_versions(self.dep, job_id)))

    async def get_run(self, request: Request) -> Response:
        return json_response(await self._run(ops.get_run(self.dep, request.path_params["run_id"])))

    async def get_output(self, request: Request) -> Response:
        rid = request.path_params["run_id"]
        return json_response(await self._run(ops.get_output(self.dep, rid)))

    async def job_ticks(self, request: Request) -> Response:
        """Every nominal tick of the job in [from, to] and what became of it."""
        q: TicksQuery = _query(request, TicksQuery)
        job_id = request.path_params["job_id"]
        op = audit.job_ticks(self.dep, job_id, _ms(q.from_), _ms(q.to), q.limit)
        return json_response(await self._run(op))

    async def create_dag(self, request: Request) -> Response:
        spec = await _decode(request, _dag_decoder)
        return json_response(await self._run(dag_ops.create_dag(self.dep, spec)), 201)

    async def list_dags(self, request: Request) -> Response:
        q: DagQuery = _query(request, DagQuery)
        op = listing.dags_page(self.dep, q.limit, *_cursor(q), opt(q.status), opt(q.name_prefix))
        return json_response(await self._run(op))

    async def get_dag(self, request: Request) -> Response:
        dag_id = request.path_params["dag_id"]
        return json_response(await self._run(dag_ops.get_dag(self.dep, dag_id)))

    async def patch_dag(self, request: Request) -> Response:
        patch = await _decode(request, _dag_patch_decoder)
        if patch.status == JobStatus.DELETED:
            raise _validation("use DELETE to delete a DAG", "$.status")
        dag_id = request.path_params["dag_id"]
        return json_response(
            await self._run(dag_ops.set_dag_status(self.dep, dag_id, patch.status))
        )

    async def delete_dag(self, request: Request) -> Response:
        dag_id = request.path_params["dag_id"]
        return json_response(await self._run(dag_ops.delete_dag(self.dep, dag_id)))

    async def trigger_dag(self, request: Request) -> Response:
        dag_id = request.path_params["dag_id"]
        await _no_body(request)
        return json_response(await self._run(dag_ops.trigger_dag(self.dep, dag_id)), 201)

    async def list_dag_runs(self, request: Request) -> Response:
        q: DagRunQuery = _query(request, DagRunQuery)
        dag_id = request.path_params["dag_id"]
        op = listing.dag_runs_page(
            self.dep, dag_id, q.limit, *_cursor(q), _ms(q.since), _ms(q.until)
        )
        return json_response(await self._run(op))

    async def get_dag_run(self, request: Request) -> Response:
        drid = request.path_params["dag_run_id"]
        return json_response(await self._run(dag_ops.get_dag_run(self.dep, drid)))

    async def preview(self, request: Request) -> Response:
        body = await _decode(request, _preview_decoder)
        return json_response(await self._run(preview_schedule(body)))

    async def cluster(self, request: Request) -> Response:
        return json_response(await self._run(cluster_view(self.dep)))

    async def dead_letter(self, request: Request) -> Response:
        q: DeadLetterQuery = _query(request, DeadLetterQuery)
        return json_response(
            await self._run(listing.dead_letter_page(self.dep, q.limit, *_cursor(q)))
        )

    async def retry_run(self, request: Request) -> Response:
        rid = request.path_params["run_id"]
        await _no_body(request)
        return json_response(await self._run(ops.retry_run(self.dep, rid)), 201)

    async def workers(self, request: Request) -> Response:
        return json_response(await self._run(list_workers(self.dep)))

    async def worker_heartbeat(self, request: Request) -> Response:
        worker_id = request.path_params["worker_id"]
        body = await _decode(request, _heartbeat_decoder)
        return json_response(await self._run(protocol.heartbeat(self.dep, worker_id, body)))

    async def worker_claim(self, request: Request) -> Response:
        body = await _decode(request, _claim_decoder)
        return json_response(await self._run(protocol.claim(self.dep, body)))

    async def worker_renew(self, request: Request) -> Response:
        body = await _decode(request, _renew_decoder)
        rid = request.path_params["run_id"]
        return json_response(await self._run(protocol.renew(self.dep, rid, body)))

    async def worker_complete(self, request: Request) -> Response:
        body = await _decode(request, _complete_decoder)
        rid = request.path_params["run_id"]
        return json_response(await self._run(protocol.complete(self.dep, rid, body)))

    async def healthz(self, request: Request) -> Response:
        return json_response(Health(status="ok"))

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
        return json_response(body, 200 if not unowned else 503)

    async def status(self, request: Request) -> Response:
        return json_response(await self._run(status_view(self.dep)))

    async def prometheus(self, request: Request) -> Response:
        """This process's series, and the cluster's state read from Redis now."""
        try:
            refresh_cluster(self.metrics, await self._run(status_view(self.dep)))
        except ApiError:
            pass  # Redis unreachable: still export what this process counted
        body, content_type = self.metrics.render()
        return Response(body, media_type=content_type)

    async def openapi(self, request: Request) -> Response:
        return json_response(openapi_document())


def _guard(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as err:
            return error_response(err)
        except (RedisConnectionError, RedisUnavailable) as exc:
            # Nothing was changed (or it will be replayed by the caller): come back later.
            return error_response(ApiError(503, "redis_unavailable", str(exc)))
        except Exception:  # a bug: say so in the error shape, and log it
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(ApiError(500, "internal_error", "internal error (logged)"))

    return endpoint


def _route(path: str, **handlers: Callable[[Request], Any]) -> Route:
    """One route per path, dispatching on the method, so a 405 lists every method the path
    has in its Allow header."""
    guarded = {method.upper(): _guard(handler) for method, handler in handlers.items()}
    if "GET" in guarded:
        guarded["HEAD"] = guarded["GET"]

    async def endpoint(request: Request) -> Response:
        return await guarded[request.method](request)

    return Route(path, endpoint, methods=list(guarded))


def create_app(redis: Redis, dep: ops.Deployment, metrics: Metrics | None = None) -> Starlette:
    """The API of a node (whose metrics it exports) or of a router (metrics of its own)."""
    api = Api(redis, dep, metrics or Metrics())
    routes = [
        _route("/api/v1/jobs", post=api.create_job, get=api.list_jobs),
        _route(
            "/api/v1/jobs/{job_id}", get=api.get_job, patch=api.patch_job, delete=api.delete_job
        ),
        _route("/api/v1/jobs/{job_id}/trigger", post=api.trigger),
        _route("/api/v1/jobs/{job_id}/runs", get=api.list_runs),
        _route("/api/v1/jobs/{job_id}/versions", get=api.job_versions),
        _route("/api/v1/jobs/{job_id}/backfill", post=api.backfill),
        _route("/api/v1/jobs/{job_id}/ticks", get=api.job_ticks),
        _route("/api/v1/runs/{run_id}", get=api.get_run),
        _route("/api/v1/runs/{run_id}/output", get=api.get_output),
        _route("/api/v1/runs/{run_id}/retry", post=api.retry_run),
        _route("/api/v1/dead-letter", get=api.dead_letter),
        _route("/api/v1/dags", post=api.create_dag, get=api.list_dags),
        _route(
            "/api/v1/dags/{dag_id}", get=api.get_dag, patch=api.patch_dag, delete=api.delete_dag
        ),
        _route("/api/v1/dags/{dag_id}/trigger", post=api.trigger_dag),
        _route("/api/v1/dags/{dag_id}/runs", get=api.list_dag_runs),
        _route("/api/v1/dags/{job_id}/ticks", get=api.job_ticks),
        _route("/api/v1/dag-runs/{dag_run_id}", get=api.get_dag_run),
        _route("/api/v1/schedules/preview", post=api.preview),
        _route("/api/v1/cluster", get=api.cluster),
        _route("/api/v1/workers", get=api.workers),
        _route("/internal/workers/{worker_id}/heartbeat", post=api.worker_heartbeat),
        _route("/internal/runs/claim", post=api.worker_claim),
        _route("/internal/runs/{run_id}/lease/renew", post=api.worker_renew),
        _route("/internal/runs/{run_id}/complete", post=api.worker_complete),
        _route("/healthz", get=api.healthz),
        _route("/readyz", get=api.readyz),
        _route("/openapi.json", get=api.openapi),
        _route("/api/v1/status", get=api.status),
        _route("/metrics", get=api.prometheus),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        name = "method_not_allowed" if code == 405 else "not_found"
        response = error_response(ApiError(code, name, f"{request.method} {request.url.path}"))
        response.headers.update(getattr(exc, "headers", None) or {})  # 405: Allow
        return response

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
