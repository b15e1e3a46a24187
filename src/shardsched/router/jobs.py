"""Jobs: register, read, list, replace, change, pause, delete, restore and trigger a job,
and its versions and change log. Each handler sits beside its route (:data:`ROUTES`)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched import ops
from shardsched.core import views as v
from shardsched.core.errors import JobNotFound
from shardsched.core.models import JobSpec
from shardsched.core.params import TriggerRequest
from shardsched.core.patches import JobPatch
from shardsched.core.views import Job, JobCreated, JobList
from shardsched.ops import listing
from shardsched.ops.access import teams
from shardsched.ops.history import changes
from shardsched.ops.jobs import declare, names
from shardsched.ops.jobs.read_page import list_filter
from shardsched.ops.recent import recent_runs
from shardsched.router import http
from shardsched.router.context import Context, put_answer
from shardsched.router.guards import who
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import ChangeQuery, CreateQuery, JobQuery, PutQuery, opt

_spec_decoder = msgspec.json.Decoder(JobSpec)
_patch_decoder = msgspec.json.Decoder(JobPatch)
_trigger_decoder = msgspec.json.Decoder(TriggerRequest)


async def create_job(cx: Context, request: Request) -> Response:
    q: CreateQuery = http.query(request, CreateQuery)
    spec = await http.decode(request, _spec_decoder)
    teams.require_name(who(request), spec.name)
    teams.require_keys(who(request), [(spec.concurrency_key, "$.concurrency_key")])
    await cx.dependencies(request, spec.depends_on)
    await cx.upstreams(request, spec.on)
    create = names.create_named if q.unique_name else ops.create_job
    created: JobCreated = await cx.run(create(cx.dep, spec, who(request).name))
    return http.json_response(created, 201)


async def list_jobs(cx: Context, request: Request) -> Response:
    q: JobQuery = http.query(request, JobQuery)
    within = who(request).prefixes
    if q.name is not msgspec.UNSET:
        return http.json_response(await _named(cx, q, q.name, within))
    op = listing.jobs_page(
        cx.dep,
        q.limit,
        *http.cursor(q),
        opt(q.status),
        opt(q.name_prefix),
        within,
        q.include_deleted,
        http.labels(q.label),
        opt(q.queue),
        opt(q.health),
    )
    page = await cx.run(op)
    if q.recent:
        recent = await cx.run(recent_runs(cx.dep, [j.job_id for j in page.jobs], q.recent))
        for job, runs in zip(page.jobs, recent, strict=True):
            job.recent_runs = runs
    return http.json_response(page)


async def _named(cx: Context, q: JobQuery, name: str, within: tuple[str, ...]) -> JobList:
    """The jobs of exactly ``name``, filtered as a page would be."""
    keep = list_filter(
        opt(q.status), opt(q.name_prefix), within, q.include_deleted, http.labels(q.label),
        opt(q.queue),
    )  # fmt: skip
    jobs = await cx.run(names.jobs_named(cx.dep, name, include_deleted=True))
    return JobList([job for job in jobs if keep is None or keep(job)][: q.limit])


async def get_job(cx: Context, request: Request) -> Response:
    job: Job = await cx.run(ops.get_job(cx.dep, await cx.job(request)))
    return http.etag(http.json_response(job), job.version)


async def put_job(cx: Context, request: Request) -> Response:
    """Create the job under the path's id or replace its definition (201, 200); the
    answer says which in ``Shardsched-Outcome``."""
    q: PutQuery = http.query(request, PutQuery)
    spec = await http.decode(request, _spec_decoder)
    job_id: str = request.path_params["job_id"]
    teams.require_name(who(request), spec.name)
    teams.require_keys(who(request), [(spec.concurrency_key, "$.concurrency_key")])
    await cx.not_others(request, job_id, JobNotFound(job_id))
    await cx.dependencies(request, spec.depends_on)
    await cx.upstreams(request, spec.on)
    op = declare.put_job(
        cx.dep, job_id, spec, http.if_match(request), who(request).name, paused=q.paused
    )
    return put_answer(*(await cx.run(op)))


async def patch_job(cx: Context, request: Request) -> Response:
    patch = await http.decode(request, _patch_decoder)
    job_id = await cx.job(request)
    if patch.name is not None:
        teams.require_name(who(request), patch.name)
    teams.require_keys(who(request), [(patch.concurrency_key, "$.concurrency_key")])
    if patch.depends_on:
        await cx.dependencies(request, patch.depends_on)
    await cx.upstreams(request, patch.on)
    op = ops.patch_job(cx.dep, job_id, patch, who(request).name, http.if_match(request))
    job: Job = await cx.run(op)
    return http.etag(http.json_response(job), job.version)


async def delete_job(cx: Context, request: Request) -> Response:
    job_id = await cx.job(request)
    return http.json_response(await cx.run(ops.delete_job(cx.dep, job_id, who(request).name)))


async def trigger(cx: Context, request: Request) -> Response:
    job_id = await cx.job(request)
    body = await http.optional_body(request, _trigger_decoder)
    triggered = await cx.run(ops.trigger(cx.dep, job_id, who(request).name, body))
    return http.json_response(triggered, 200 if triggered.repeated else 201)


async def job_versions(cx: Context, request: Request) -> Response:
    job_id = await cx.job(request)
    return http.json_response(await cx.run(ops.job_versions(cx.dep, job_id)))


async def job_changes(cx: Context, request: Request) -> Response:
    q: ChangeQuery = http.query(request, ChangeQuery)
    job_id = await cx.job(request)
    op = changes.job_changes(cx.dep, job_id, q.limit, opt(q.cursor))
    return http.json_response(await cx.run(op))


async def restore_job(cx: Context, request: Request) -> Response:
    job_id = await cx.job(request)
    op = ops.restore_job(cx.dep, job_id, who(request).name)
    return http.json_response(await cx.run(op), 201)


ROUTES: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/jobs",
        "Register a job (?unique_name=true: refused if a job has its name)",
        v.JobCreated,
        201,
        JobSpec,
        query=CreateQuery,
        errors=(*BODY_ERRORS, 409),
        tags=("jobs",),
        handler=create_job,
    ),
    Operation(
        "get",
        "/api/v1/jobs",
        "List jobs, newest first",
        v.JobList,
        query=JobQuery,
        errors=(422,),
        tags=("jobs",),
        handler=list_jobs,
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}",
        "A job: definition, status, next run",
        v.Job,
        errors=(404,),
        tags=("jobs",),
        handler=get_job,
    ),
    Operation(
        "put",
        "/api/v1/jobs/{job_id}",
        "Create the job under this id, or replace its definition as a new version",
        v.Job,
        body=JobSpec,
        query=PutQuery,
        errors=(*BODY_ERRORS, 409, 412),
        tags=("jobs",),
        handler=put_job,
    ),
    Operation(
        "patch",
        "/api/v1/jobs/{job_id}",
        "Change, pause or resume a job",
        v.Job,
        body=JobPatch,
        errors=(*BODY_ERRORS, 404, 409, 412),
        tags=("jobs",),
        handler=patch_job,
    ),
    Operation(
        "delete",
        "/api/v1/jobs/{job_id}",
        "Delete a job, keeping its history",
        v.Job,
        errors=(404, 409),
        tags=("jobs",),
        handler=delete_job,
    ),
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/trigger",
        "Run a job now (with args of its own); 200 for a repeated idempotency key",
        v.Triggered,
        201,
        body=TriggerRequest,
        body_optional=True,
        errors=(404, 409, 422),
        tags=("jobs",),
        handler=trigger,
        operation_id="trigger_job",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/versions",
        "A job's definitions over time",
        v.JobVersions,
        errors=(404, 409),
        tags=("jobs",),
        handler=job_versions,
        operation_id="list_job_versions",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/changes",
        "Who changed, paused, deleted, triggered or backfilled the job, and when",
        v.ChangeList,
        query=ChangeQuery,
        errors=(404, 422),
        tags=("jobs",),
        handler=job_changes,
        operation_id="list_job_changes",
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
        handler=restore_job,
    ),
)
