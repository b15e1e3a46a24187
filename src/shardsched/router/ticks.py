"""A schedule's ticks: every nominal tick of a job or DAG and what became of it, their
counts over a window, running the ticks a window missed (backfill) or a pause went
over (resume), and the ticks to come (a job's upcoming fires)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched import ops
from shardsched.core import time_views as tv
from shardsched.core.backfill import BackfillRequest, ResumeRequest
from shardsched.ops.history import audit
from shardsched.ops.history import stats as stats_ops
from shardsched.ops.history.audit import TickList
from shardsched.ops.jobs import resume as resume_ops
from shardsched.ops.jobs.upcoming import upcoming_fires
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import who
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import StatsQuery, TicksQuery, UpcomingQuery

_backfill_decoder = msgspec.json.Decoder(BackfillRequest)
_resume = msgspec.json.Decoder(ResumeRequest)


async def backfill(cx: Context, request: Request) -> Response:
    body = await http.decode(request, _backfill_decoder)
    job_id = await cx.job(request)
    response = http.json_response(
        await cx.run(ops.backfill(cx.dep, job_id, body, who(request).name)), 202
    )
    return http.deprecated(response, "start/end are since/until") if body.deprecated else response


async def job_ticks(cx: Context, request: Request) -> Response:
    """Every nominal tick of the job in [since, until] and what became of it."""
    return await _ticks(cx, request, await cx.job(request))


async def dag_ticks(cx: Context, request: Request) -> Response:
    """Every nominal tick of the DAG in [since, until] and what became of it."""
    return await _ticks(cx, request, await cx.dag(request))


async def _ticks(cx: Context, request: Request, any_id: str) -> Response:
    q: TicksQuery = http.query(request, TicksQuery)
    since, until, old = q.window()
    op = audit.job_ticks(cx.dep, any_id, http.ms(since), http.ms(until), q.limit)
    response = http.json_response(await cx.run(op))
    return http.deprecated(response, "from/to are since/until") if old else response


async def job_upcoming(cx: Context, request: Request) -> Response:
    """The job's next fires as it will fire them (its phase, window, calendars, fires left
    and pause in effect)."""
    q: UpcomingQuery = http.query(request, UpcomingQuery)
    job_id = await cx.job(request)
    return http.json_response(await cx.run(upcoming_fires(cx.dep, job_id, q.count)))


async def job_stats(cx: Context, request: Request) -> Response:
    return await _stats(cx, request, await cx.job(request))


async def dag_stats(cx: Context, request: Request) -> Response:
    return await _stats(cx, request, await cx.dag(request))


async def _stats(cx: Context, request: Request, any_id: str) -> Response:
    q: StatsQuery = http.query(request, StatsQuery)
    op = stats_ops.job_stats(cx.dep, any_id, http.ms(q.since), http.ms(q.until))
    return http.json_response(await cx.run(op))


async def resume_job(cx: Context, request: Request) -> Response:
    job_id = await cx.job(request)
    body = await http.optional_body(request, _resume) or ResumeRequest()
    op = resume_ops.resume_job(cx.dep, job_id, body, who(request).name)
    return http.json_response(await cx.run(op))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/backfill",
        "Run the missing ticks of a window",
        tv.BackfillResult,
        202,
        BackfillRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("jobs",),
        handler=backfill,
        operation_id="backfill_job",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/ticks",
        "Every nominal tick and its fate",
        TickList,
        query=TicksQuery,
        errors=(404, 422),
        tags=("jobs",),
        handler=job_ticks,
        operation_id="list_job_ticks",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/upcoming",
        "A job's next fires as it will fire them: from its next tick, with its window,"
        " fires left, calendars and pause in effect",
        tv.JobUpcoming,
        query=UpcomingQuery,
        errors=(404, 422),
        tags=("jobs",),
        handler=job_upcoming,
        operation_id="get_job_upcoming",
    ),
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/stats",
        "A job's ticks over a window counted: fired, late, skipped by reason, missed, and"
        " its effective cadence beside the configured one",
        tv.JobStats,
        query=StatsQuery,
        errors=(404, 422),
        tags=("jobs",),
        handler=job_stats,
        operation_id="get_job_stats",
    ),
    Operation(
        "post",
        "/api/v1/jobs/{job_id}/resume",
        "Resume a paused job, running the ticks its pause went over as chosen (skip,"
        " latest, all; default its on_resume); dry_run lists them",
        tv.ResumeResult,
        200,
        ResumeRequest,
        body_optional=True,
        errors=(404, 409, 422),
        tags=("jobs",),
        handler=resume_job,
        operation_id="resume_job",
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}/ticks",
        "Every nominal tick of a DAG",
        TickList,
        query=TicksQuery,
        errors=(404, 422),
        tags=("dags",),
        handler=dag_ticks,
        operation_id="list_dag_ticks",
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}/stats",
        "A DAG's ticks over a window counted (as a job's)",
        tv.JobStats,
        query=StatsQuery,
        errors=(404, 422),
        tags=("dags",),
        handler=dag_stats,
        operation_id="get_dag_stats",
    ),
)
