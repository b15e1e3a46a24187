"""Workers: the live workers, and the internal protocol a worker over HTTP speaks
(heartbeat, claim, renew a lease, complete), each call checked against the worker's own
token."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.ops.deployment import protocol
from shardsched.ops.deployment.cluster import WorkerList, list_workers
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import as_worker, unbound
from shardsched.router.operation import BODY_ERRORS, Operation

_heartbeat_decoder = msgspec.json.Decoder(protocol.HeartbeatRequest)
_claim_decoder = msgspec.json.Decoder(protocol.ClaimRequest)
_renew_decoder = msgspec.json.Decoder(protocol.RenewRequest)
_complete_decoder = msgspec.json.Decoder(protocol.CompleteRequest)


async def workers(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(list_workers(cx.dep)))


async def worker_heartbeat(cx: Context, request: Request) -> Response:
    worker_id = request.path_params["worker_id"]
    as_worker(request, worker_id)
    body = await http.decode(request, _heartbeat_decoder)
    return http.json_response(await cx.run(protocol.heartbeat(cx.dep, worker_id, body)))


async def worker_claim(cx: Context, request: Request) -> Response:
    body = await http.decode(request, _claim_decoder)
    as_worker(request, body.worker_id)
    return http.json_response(await cx.run(protocol.claim(cx.dep, body)))


async def worker_renew(cx: Context, request: Request) -> Response:
    body = await http.decode(request, _renew_decoder)
    as_worker(request, body.worker_id)
    rid = request.path_params["run_id"]
    return http.json_response(await cx.run(protocol.renew(cx.dep, rid, body)))


async def worker_complete(cx: Context, request: Request) -> Response:
    body = await http.decode(request, _complete_decoder)
    as_worker(request, body.worker_id)
    rid = request.path_params["run_id"]
    return http.json_response(await cx.run(protocol.complete(cx.dep, rid, body)))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/workers",
        "Live workers and their free slots",
        WorkerList,
        tags=("operations",),
        handler=workers,
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
        handler=worker_heartbeat,
    ),
    Operation(
        "post",
        "/internal/runs/claim",
        "Claim runs",
        protocol.ClaimResponse,
        body=protocol.ClaimRequest,
        errors=BODY_ERRORS,
        tags=("worker protocol",),
        handler=worker_claim,
    ),
    Operation(
        "post",
        "/internal/runs/{run_id}/lease/renew",
        "Renew a run's lease",
        protocol.RenewResponse,
        body=protocol.RenewRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("worker protocol",),
        handler=worker_renew,
    ),
    Operation(
        "post",
        "/internal/runs/{run_id}/complete",
        "Report a run's outcome",
        protocol.CompleteResponse,
        body=protocol.CompleteRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("worker protocol",),
        handler=worker_complete,
    ),
)
