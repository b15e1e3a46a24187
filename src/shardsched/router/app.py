"""The HTTP API (``/api/v1``): a thin starlette shell over :mod:`shardsched.ops`.

Stateless: every request routes by id to its shard and runs the same operations (and Lua
scripts) the SDK runs. Bodies are decoded by the msgspec Structs of
:mod:`shardsched.core.models`; anything invalid is answered before a single write, with the
one error shape (:class:`~shardsched.router.schemas.ErrorBody`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from shardsched import ops
from shardsched.core.access import Scope
from shardsched.core.backfill import BackfillRequest
from shardsched.core.errors import DagNotFound, DagRunNotFound, JobNotFound, ValidationError
from shardsched.core.ids import dag_id_of, dag_run_id_of
from shardsched.core.labels import parse_label_filter
from shardsched.core.models import DagSpec, JobSpec, JobStatus, SchedulePreviewRequest
from shardsched.core.params import TriggerRequest
from shardsched.core.patches import DagPatch, JobPatch
from shardsched.core.views import Dag, Job, JobCreated, JobList
from shardsched.ops import access, audit, changes, dag_runs, declare, listing, names
from shardsched.ops import dags as dag_ops
from shardsched.ops.job_reads import list_filter
from shardsched.ops.preview import preview_with_calendars
from shardsched.ops.recent import recent_runs
from shardsched.router import docs, http
from shardsched.router.admin import AdminHandlers
from shardsched.router.control import ControlHandlers
from shardsched.router.guards import AccessPolicy, Gate, who
from shardsched.router.notify_handlers import NotifyHandlers
from shardsched.router.routes import OPERATIONS
from shardsched.router.schemas import (
    ChangeQuery,
    CreateQuery,
    DagQuery,
    DagRunQuery,
    DeadLetterQuery,
    JobQuery,
    RunQuery,
    TicksQuery,
    opt,
)
from shardsched.router.streams import StreamHandlers
from shardsched.router.time_handlers import TimeHandlers
from shardsched.router.ui import Console
from shardsched.runtime.metrics import Metrics
from shardsched.store.redis import Redis

log = logging.getLogger(__name__)
_spec_decoder = msgspec.json.Decoder(JobSpec)
_patch_decoder = msgspec.json.Decoder(JobPatch)
_dag_decoder = msgspec.json.Decoder(DagSpec)
_dag_patch_decoder = msgspec.json.Decoder(DagPatch)
_preview_decoder = msgspec.json.Decoder(SchedulePreviewRequest)
_backfill_decoder = msgspec.json.Decoder(BackfillRequest)
_trigger_decoder = msgspec.json.Decoder(TriggerRequest)


def _labels(text: str | UnsetType) -> dict[str, str] | None:
    """A list's ``?label=`` filter, or None when there is none."""
    if text is UNSET:
        return None
    try:
        return parse_label_filter(text)
    except ValidationError as exc:
        raise http.validation(exc.message, exc.field) from None


class Api(AdminHandlers, StreamHandlers, ControlHandlers, NotifyHandlers, TimeHandlers):
    """The handlers of every route (jobs, runs and DAGs here; the rest in :mod:`.admin`)."""

    async def create_job(self, request: Request) -> Response:
        q: CreateQuery = http.query(request, CreateQuery)
        spec = await http.decode(request, _spec_decoder)
        access.require_name(who(request), spec.name)
        access.require_keys(who(request), [(spec.concurrency_key, "$.concurrency_key")])
        await self._dependencies(request, spec.depends_on)
        create = names.create_named if q.unique_name else ops.create_job
        created: JobCreated = await self._run(create(self.dep, spec, who(request).name))
        return http.json_response(created, 201)

    async def get_job(self, request: Request) -> Response:
        job: Job = await self._run(ops.get_job(self.dep, await self._job(request)))
        return http.etag(http.json_response(job), job.version)

    async def put_job(self, request: Request) -> Response:
        """Create the job under the path's id or replace its definition (201, 200); the
        answer says which in ``Shardsched-Outcome``."""
        spec = await http.decode(request, _spec_decoder)
        job_id: str = request.path_params["job_id"]
        access.require_name(who(request), spec.name)
        access.require_keys(who(request), [(spec.concurrency_key, "$.concurrency_key")])
        await self._not_others(request, job_id, JobNotFound(job_id))
        await self._dependencies(request, spec.depends_on)
        op = declare.put_job(self.dep, job_id, spec, http.if_match(request), who(request).name)
        return _put_answer(*(await self._run(op)))

    async def patch_job(self, request: Request) -> Response:
        patch = await http.decode(request, _patch_decoder)
        job_id = await self._job(request)
        if patch.name is not None:
            access.require_name(who(request), patch.name)
        access.require_keys(who(request), [(patch.concurrency_key, "$.concurrency_key")])
        if patch.depends_on:
            await self._dependencies(request, patch.depends_on)
        op = ops.patch_job(self.dep, job_id, patch, who(request).name, http.if_match(request))
        job: Job = await self._run(op)
        return http.etag(http.json_response(job), job.version)

    async def delete_job(self, request: Request) -> Response:
        job_id = await self._job(request)
        return http.json_response(
            await self._run(ops.delete_job(self.dep, job_id, who(request).name))
        )

    async def restore_job(self, request: Request) -> Response:
        job_id = await self._job(request)
        op = ops.restore_job(self.dep, job_id, who(request).name)
        return http.json_response(await self._run(op), 201)

    async def trigger(self, request: Request) -> Response:
        job_id = await self._job(request)
        body = await http.optional_body(request, _trigger_decoder)
        triggered = await self._run(ops.trigger(self.dep, job_id, who(request).name, body))
        return http.json_response(triggered, 200 if triggered.repeated else 201)

    async def list_jobs(self, request: Request) -> Response:
        q: JobQuery = http.query(request, JobQuery)
        within = who(request).prefixes
        if q.name is not msgspec.UNSET:
            return http.json_response(await self._named(q, q.name, within))
        op = listing.jobs_page(
            self.dep,
            q.limit,
            *http.cursor(q),
            opt(q.status),
            opt(q.name_prefix),
            within,
            q.include_deleted,
            _labels(q.label),
            opt(q.queue),
            opt(q.health),
        )
        page = await self._run(op)
        if q.recent:
            recent = await self._run(recent_runs(self.dep, [j.job_id for j in page.jobs], q.recent))
            for job, runs in zip(page.jobs, recent, strict=True):
                job.recent_runs = runs
        return http.json_response(page)

    async def _named(self, q: JobQuery, name: str, within: tuple[str, ...]) -> JobList:
        """The jobs of exactly ``name``, filtered as a page would be."""
        keep = list_filter(
            opt(q.status), opt(q.name_prefix), within, q.include_deleted, _labels(q.label),
            opt(q.queue),
        )  # fmt: skip
        jobs = await self._run(names.jobs_named(self.dep, name, include_deleted=True))
        return JobList([job for job in jobs if keep is None or keep(job)][: q.limit])

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
        response = http.json_response(
            await self._run(ops.backfill(self.dep, job_id, body, who(request).name)), 202
        )
        return (
            http.deprecated(response, "start/end are since/until") if body.deprecated else response
        )

    async def job_versions(self, request: Request) -> Response:
        job_id = await self._job(request)
        return http.json_response(await self._run(ops.job_versions(self.dep, job_id)))

    async def job_changes(self, request: Request) -> Response:
        q: ChangeQuery = http.query(request, ChangeQuery)
        job_id = await self._job(request)
        op = changes.job_changes(self.dep, job_id, q.limit, opt(q.cursor))
        return http.json_response(await self._run(op))

    async def dag_changes(self, request: Request) -> Response:
        q: ChangeQuery = http.query(request, ChangeQuery)
        dag_id = await self._dag(request)
        op = changes.dag_changes(self.dep, dag_id, q.limit, opt(q.cursor))
        return http.json_response(await self._run(op))

    async def get_run(self, request: Request) -> Response:
        run = await self._run(ops.get_run(self.dep, await self._run_id(request)))
        if (template := os.environ.get("SHARDSCHED_TRACE_URL")) and run.trace_id:
            # e.g. http://jaeger:16686/trace/{trace_id} (docs/tracing.md)
            url = template.replace("{trace_id}", run.trace_id)
            run = msgspec.structs.replace(run, trace_url=url)
        return http.json_response(run)

    async def get_output(self, request: Request) -> Response:
        rid = await self._run_id(request)
        return http.json_response(await self._run(ops.get_output(self.dep, rid)))

    async def job_ticks(self, request: Request) -> Response:
        """Every nominal tick of the job in [since, until] and what became of it."""
        return await self._ticks(request, await self._job(request))

    async def dag_ticks(self, request: Request) -> Response:
        """Every nominal tick of the DAG in [since, until] and what became of it."""
        return await self._ticks(request, await self._dag(request))

    async def _ticks(self, request: Request, any_id: str) -> Response:
        q: TicksQuery = http.query(request, TicksQuery)
        since, until, old = q.window()
        op = audit.job_ticks(self.dep, any_id, http.ms(since), http.ms(until), q.limit)
        response = http.json_response(await self._run(op))
        return http.deprecated(response, "from/to are since/until") if old else response

    async def create_dag(self, request: Request) -> Response:
        spec = await http.decode(request, _dag_decoder)
        access.require_name(who(request), spec.name)
        access.require_keys(who(request), _task_keys(spec))
        return http.json_response(
            await self._run(dag_ops.create_dag(self.dep, spec, who(request).name)), 201
        )

    async def list_dags(self, request: Request) -> Response:
        q: DagQuery = http.query(request, DagQuery)
        within = who(request).prefixes
        op = listing.dags_page(
            self.dep,
            q.limit,
            *http.cursor(q),
            opt(q.status),
            opt(q.name_prefix),
            within,
            q.include_deleted,
            _labels(q.label),
        )
        return http.json_response(await self._run(op))

    async def get_dag(self, request: Request) -> Response:
        dag: Dag = await self._run(dag_ops.get_dag(self.dep, await self._dag(request)))
        return http.etag(http.json_response(dag), dag.version)

    async def put_dag(self, request: Request) -> Response:
        """Create the DAG under the path's id or replace its definition (201, 200)."""
        spec = await http.decode(request, _dag_decoder)
        dag_id = dag_id_of(request.path_params["dag_id"])
        access.require_name(who(request), spec.name)
        access.require_keys(who(request), _task_keys(spec))
        await self._not_others(request, dag_id, DagNotFound(dag_id))
        op = declare.put_dag(self.dep, dag_id, spec, http.if_match(request), who(request).name)
        return _put_answer(*(await self._run(op)))

    async def patch_dag(self, request: Request) -> Response:
        patch = await http.decode(request, _dag_patch_decoder)
        if patch.status == JobStatus.DELETED:
            raise http.validation("use DELETE to delete a DAG", "$.status")
        dag_id = await self._dag(request)
        return http.json_response(
            await self._run(
                dag_ops.set_dag_status(self.dep, dag_id, patch.status, who(request).name)
            )
        )

    async def delete_dag(self, request: Request) -> Response:
        dag_id = await self._dag(request)
        return http.json_response(
            await self._run(dag_ops.delete_dag(self.dep, dag_id, who(request).name))
        )

    async def restore_dag(self, request: Request) -> Response:
        dag_id = await self._dag(request)
        op = dag_ops.restore_dag(self.dep, dag_id, who(request).name)
        return http.json_response(await self._run(op), 201)

    async def trigger_dag(self, request: Request) -> Response:
        dag_id = await self._dag(request)
        body = await http.optional_body(request, _trigger_decoder)
        return http.json_response(
            await self._run(dag_ops.trigger_dag(self.dep, dag_id, who(request).name, body)), 201
        )

    async def list_dag_runs(self, request: Request) -> Response:
        q: DagRunQuery = http.query(request, DagRunQuery)
        dag_id = await self._dag(request)
        op = listing.dag_runs_page(
            self.dep, dag_id, q.limit, *http.cursor(q), http.ms(q.since), http.ms(q.until)
        )
        return http.json_response(await self._run(op))

    async def get_dag_run(self, request: Request) -> Response:
        drid = dag_run_id_of(request.path_params["dag_run_id"])
        await self._visible(request, drid, DagRunNotFound(drid))
        return http.json_response(await self._run(dag_runs.get_dag_run(self.dep, drid)))

    async def preview(self, request: Request) -> Response:
        body = await http.decode(request, _preview_decoder)
        return http.json_response(await self._run(preview_with_calendars(self.dep, body)))

    async def dead_letter(self, request: Request) -> Response:
        q: DeadLetterQuery = http.query(request, DeadLetterQuery)
        within = who(request).prefixes
        op = listing.dead_letter_page(self.dep, q.limit, *http.cursor(q), within)
        return http.json_response(await self._run(op))

    async def retry_run(self, request: Request) -> Response:
        rid = await self._run_id(request)
        await http.no_body(request)
        return http.json_response(
            await self._run(ops.retry_run(self.dep, rid, who(request).name)), 201
        )


def _put_answer(obj: Job | Dag, outcome: declare.Outcome) -> Response:
    """A PUT's answer: 201 when it created, else 200; what it did, and the version."""
    response = http.json_response(obj, 201 if outcome == declare.Outcome.CREATED else 200)
    response.headers["shardsched-outcome"] = outcome.value
    return http.etag(response, obj.version)


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
    routes.append(http.route("/internal/openapi.json", get=gated(api.internal_openapi, None)))
    routes.append(http.route("/docs", get=gated(docs.docs_page, None)))
    routes.append(http.route("/docs/{name}", get=gated(docs.docs_asset, None)))
    console = Console(gate)
    routes.append(http.route("/", get=console.root))
    routes.append(http.route("/ui", get=console.root))
    routes.append(http.route("/ui/", get=console.index))
    routes.append(http.route("/ui/login", get=console.login_page, post=console.login))
    routes.append(http.route("/ui/logout", post=console.logout))
    routes.append(http.route("/ui/session", get=console.session))
    routes.append(http.route("/ui/assets/{name}", get=console.asset))

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        name = "method_not_allowed" if code == 405 else "not_found"
        response = http.error_response(
            http.ApiError(code, name, f"{request.method} {request.url.path}")
        )
        response.headers.update(getattr(exc, "headers", None) or {})  # 405: Allow
        return response

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


def _task_keys(spec: DagSpec) -> list[tuple[str | None, str]]:
    return [(t.concurrency_key, f"$.tasks[{i}].concurrency_key") for i, t in enumerate(spec.tasks)]
