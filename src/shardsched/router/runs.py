"""Runs: a job's runs, one run and its output (a page, or live as Server-Sent Events), the
dead letter and the failure inbox, what is under way now, and an operator's retry and
cancel."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import msgspec
import trio
from starlette.requests import Request
from starlette.responses import Response

from shardsched import ops
from shardsched.core import views as v
from shardsched.core.errors import RedisUnavailable, RunNotFound, ValidationError
from shardsched.core.instants import to_ms
from shardsched.core.labels import parse_label_filter
from shardsched.core.models import RunState
from shardsched.core.params import CancelRequest, RetryRequest
from shardsched.core.views import RunOutput
from shardsched.ops import listing
from shardsched.ops.recent import annotate
from shardsched.ops.runs import bulk_retry, control
from shardsched.ops.runs.active import Active, Filters, active_page
from shardsched.router import http, sse
from shardsched.router.context import Context
from shardsched.router.guards import who
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import DeadLetterQuery, FailureQuery, RunQuery, opt
from shardsched.store.redis import RedisConnectionError

_cancel_decoder = msgspec.json.Decoder(CancelRequest)
_retry_decoder = msgspec.json.Decoder(RetryRequest)
_UNDER_WAY = frozenset({"running", "queued", "scheduled", "waiting", "retrying"})
_TERMINAL = {"succeeded", "failed", "dead_letter", "skipped", "cancelled"}


async def list_runs(cx: Context, request: Request) -> Response:
    q: RunQuery = http.query(request, RunQuery)
    job_id = await cx.job(request)
    op = listing.runs_page(
        cx.dep,
        job_id,
        q.limit,
        *http.cursor(q),
        opt(q.state),
        http.ms(q.since),
        http.ms(q.until),
    )
    return http.json_response(await cx.run(op))


async def get_run(cx: Context, request: Request) -> Response:
    run = await cx.run(ops.get_run(cx.dep, await cx.run_id(request)))
    if (template := os.environ.get("SHARDSCHED_TRACE_URL")) and run.trace_id:
        # e.g. http://jaeger:16686/trace/{trace_id} (docs/tracing.md)
        url = template.replace("{trace_id}", run.trace_id)
        run = msgspec.structs.replace(run, trace_url=url)
    return http.json_response(run)


async def get_output(cx: Context, request: Request) -> Response:
    rid = await cx.run_id(request)
    return http.json_response(await cx.run(ops.get_output(cx.dep, rid)))


async def output_stream(cx: Context, request: Request) -> Response:
    """A run's output as Server-Sent Events: ``output`` events (``{"offset", "text"}``,
    the new bytes as the worker writes them, every few seconds while it runs), then one
    ``end`` event with the run's final state and exit code. A client that fell more
    than the kept 64 KiB behind gets ``{"skipped": n}`` first."""
    rid = await cx.run_id(request)
    first: RunOutput = await cx.run(ops.get_output(cx.dep, rid))  # 404 up front

    async def body() -> AsyncIterator[bytes]:
        sent = 0
        out, idle = first, 0.0
        while True:
            start = out.total_bytes - len(out.output.encode())
            data = out.output.encode()
            if out.total_bytes > sent:
                if start > sent:
                    yield sse.event("output", http.encode({"skipped": start - sent}))
                    sent = start
                new = data[sent - start :].decode("utf-8", "replace")
                yield sse.event("output", http.encode({"offset": sent, "text": new}))
                sent = out.total_bytes
                idle = 0.0
            if out.state in _TERMINAL:
                run = await cx.run(ops.get_run(cx.dep, rid))
                end = {"state": run.state, "exit_code": run.exit_code, "reason": run.reason}
                yield sse.event("end", http.encode(end))
                return
            idle += sse.EVENT_POLL_S
            if idle >= sse.KEEP_ALIVE_S:
                idle = 0.0
                yield b": keep-alive\n\n"
            await trio.sleep(sse.EVENT_POLL_S)
            try:
                out = await cx.run(ops.get_output(cx.dep, rid))
            except (http.ApiError, RedisConnectionError, RedisUnavailable):
                return  # the client asks again

    return cx.stream(request, body())


async def retry_run(cx: Context, request: Request) -> Response:
    rid = await cx.run_id(request)
    await http.no_body(request)
    return http.json_response(await cx.run(ops.retry_run(cx.dep, rid, who(request).name)), 201)


async def dead_letter(cx: Context, request: Request) -> Response:
    q: DeadLetterQuery = http.query(request, DeadLetterQuery)
    within = who(request).prefixes
    op = listing.dead_letter_page(cx.dep, q.limit, *http.cursor(q), within)
    page = await cx.run(op)
    await cx.run(annotate(cx.dep, page.runs, tails=True))  # which job, what it printed
    return http.json_response(page)


async def list_failures(cx: Context, request: Request) -> Response:
    q: FailureQuery = http.query(request, FailureQuery)
    if q.state in _UNDER_WAY:
        return await _under_way(cx, request, q)
    try:
        states = frozenset(RunState(s) for s in q.state.split(","))
    except ValueError:
        raise http.validation(f"no such run state in {q.state!r}", "$.state") from None
    for name in ("job", "queue", "worker", "label"):
        if getattr(q, name) is not msgspec.UNSET:
            raise http.validation(
                f"?{name}= filters runs under way (state running, queued, waiting or"
                " retrying); the failure inbox filters by name_prefix",
                f"$.{name}",
            )
    op = listing.failures_page(
        cx.dep,
        q.limit,
        *http.cursor(q),
        states,
        http.ms(q.since),
        http.ms(q.until),
        opt(q.name_prefix),
        who(request).prefixes,
    )
    page = await cx.run(op)
    await cx.run(annotate(cx.dep, page.runs, tails=True))
    return http.json_response(page)


async def _under_way(cx: Context, request: Request, q: FailureQuery) -> Response:
    try:
        labels = {} if q.label is msgspec.UNSET else parse_label_filter(q.label)
    except ValidationError as exc:
        raise http.validation(exc.message, exc.field) from None
    within = who(request).prefixes
    if q.name_prefix is not msgspec.UNSET:
        within = tuple(p for p in within if q.name_prefix.startswith(p)) or (
            () if within else (q.name_prefix,)
        )
        if not within:  # a team's token asked for a prefix outside its own
            return http.json_response({"runs": [], "next_cursor": None})
    filters = Filters(opt(q.job), opt(q.queue), opt(q.worker), labels, within)
    op = active_page(cx.dep, Active.parse(q.state), q.limit, *http.cursor(q), filters)
    page = await cx.run(op)
    await cx.run(annotate(cx.dep, page.runs, tails=False))
    return http.json_response(page)


async def retry_runs(cx: Context, request: Request) -> Response:
    """Retry dead-lettered runs, named or by the failure inbox's filter; a team's token
    retries only its own (others are refused as unknown)."""
    body: RetryRequest = await http.decode(request, _retry_decoder)
    principal = who(request)
    if body.run_ids is None:
        since = None if body.since is None else to_ms(body.since)
        until = None if body.until is None else to_ms(body.until)
        op = bulk_retry.selected(cx.dep, since, until, body.name_prefix, principal.prefixes)
        run_ids: list[str] = await cx.run(op)
    else:
        run_ids = []
        for rid in body.run_ids:
            await _run_visible(cx, request, rid)
            run_ids.append(rid)
    op = bulk_retry.retry_many(cx.dep, run_ids, principal.name, body.dry_run)
    return http.json_response(await cx.run(op), 200 if body.dry_run else 201)


async def _run_visible(cx: Context, request: Request, rid: str) -> None:
    await cx.visible(request, rid, RunNotFound(rid))


async def cancel_run(cx: Context, request: Request) -> Response:
    rid = await cx.run_id(request)
    body = await http.optional_body(request, _cancel_decoder) or CancelRequest()
    op = control.cancel_run(cx.dep, rid, who(request).name, body.reason)
    return http.json_response(await cx.run(op))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/jobs/{job_id}/runs",
        "A job's runs, newest first",
        v.RunList,
        query=RunQuery,
        errors=(404, 422),
        tags=("runs",),
        handler=list_runs,
    ),
    Operation(
        "get",
        "/api/v1/runs/{run_id}",
        "A run",
        v.Run,
        errors=(404,),
        tags=("runs",),
        handler=get_run,
    ),
    Operation(
        "get",
        "/api/v1/runs/{run_id}/output",
        "What a run printed (last 64 KiB)",
        v.RunOutput,
        errors=(404,),
        tags=("runs",),
        handler=get_output,
        operation_id="get_run_output",
    ),
    Operation(
        "get",
        "/api/v1/runs/{run_id}/output/stream",
        "A run's output as Server-Sent Events while it runs (output events), then its end",
        None,
        errors=(404,),
        tags=("runs",),
        handler=output_stream,
        operation_id="stream_output",
    ),
    Operation(
        "post",
        "/api/v1/runs/{run_id}/retry",
        "Send a dead-lettered run back",
        v.Run,
        201,
        errors=(404, 409, 422),
        tags=("runs",),
        handler=retry_run,
    ),
    Operation(
        "get",
        "/api/v1/dead-letter",
        "Dead-lettered runs, latest first",
        v.RunList,
        query=DeadLetterQuery,
        errors=(422,),
        tags=("runs",),
        handler=dead_letter,
        operation_id="list_dead_letter",
    ),
    Operation(
        "get",
        "/api/v1/runs",
        "The failure inbox (failed, dead-lettered), or runs under way (?state=running,"
        " queued, waiting, retrying), across jobs",
        v.RunList,
        query=FailureQuery,
        errors=(422,),
        tags=("runs",),
        handler=list_failures,
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
        handler=retry_runs,
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
        handler=cancel_run,
    ),
)
