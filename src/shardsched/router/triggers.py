"""Events, hooks and queues' default backpressure: an event emitted with a token
(``POST /api/v1/events/{event}``), a signed hook's request (``POST
/api/v1/hooks/{name}``: no token, its signature instead), an event read back with its one
outcome, the events received; the hooks managed (admin); a queue's default backlog. The
handlers sit beside their routes (:data:`ROUTES`); the work is ops/events and
ops/deployment/queues."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.access import Scope
from shardsched.core.backlog import BacklogPolicy
from shardsched.core.events import (
    PAYLOAD_MAX_BYTES,
    EmitRequest,
    EventPage,
    ReceivedEvent,
    outcome_of,
)
from shardsched.core.hooks import Hook, HookList, HookSpec, SignatureError
from shardsched.ops.access import teams
from shardsched.ops.deployment import queues
from shardsched.ops.deployment.queues import QueueBacklogs
from shardsched.ops.events import hooks, received
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import unbound, who
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import ReceivedQuery, opt

_emit_decoder = msgspec.json.Decoder(EmitRequest)
_hook_decoder = msgspec.json.Decoder(HookSpec)
_policy_decoder = msgspec.json.Decoder(BacklogPolicy)


class HookReceived(msgspec.Struct):
    """What a hook's sender is answered: the event's id and its outcome, not the jobs."""

    event_id: str
    outcome: str


async def emit_event(cx: Context, request: Request) -> Response:
    """An event: stored, delivered to the jobs that listen, answered with its outcome."""
    name: str = request.path_params["event"]
    raw = await http.read_body(request)  # JSON only: no page a user visits can emit
    body = http.decode_bytes(raw, _emit_decoder) if raw.strip() else EmitRequest()
    op = received.emit(cx.dep, name, body, f"api:{who(request).name}")
    event: ReceivedEvent = await cx.run(op)
    _count(cx, "api", event)
    if who(request).bound and event.outcome is not None:  # its own jobs only, as it sees them
        seen = [
            d for d in event.outcome.deliveries
            if (n := await cx.run(teams.owner_name(cx.dep, d.job_id))) and who(request).sees(n)
        ]  # fmt: skip
        own = outcome_of(seen)
        own.settled_at = event.outcome.settled_at
        event.outcome = own
    return http.json_response(event)


def _count(cx: Context, source: str, event: ReceivedEvent) -> None:
    outcome = event.outcome.outcome.value if event.outcome else "pending"
    cx.metrics.events_received.labels(source, outcome).inc()


async def receive_hook(cx: Context, request: Request) -> Response:
    """A hook's signed request: refused with nothing written unless it is signed by one of
    the hook's secrets within five minutes of the server's clock, JSON, and at most 64 KiB.
    Every refusal is counted by its code (``shardsched_hook_requests_refused_total``)."""
    name: str = request.path_params["name"]
    try:
        body = await http.read_raw(request, PAYLOAD_MAX_BYTES)
        try:
            event: ReceivedEvent = await cx.run(
                received.receive_hook(cx.dep, name, request.headers, body)
            )
        except SignatureError as exc:
            raise http.ApiError(401, "bad_signature", str(exc)) from None
        except received.StaleSignature as exc:
            raise http.ApiError(401, "stale_signature", str(exc)) from None
    except http.ApiError as err:
        cx.metrics.hook_refusals.labels(err.code).inc()
        raise
    _count(cx, "hook", event)
    outcome = event.outcome.outcome.value if event.outcome else "pending"
    return http.json_response(HookReceived(event.event_id, outcome))


async def get_event(cx: Context, request: Request) -> Response:
    unbound(request)  # its deliveries name jobs of every team
    event_id: str = request.path_params["event"]
    return http.json_response(await cx.run(received.get_event(cx.dep, event_id)))


async def list_received(cx: Context, request: Request) -> Response:
    unbound(request)
    q: ReceivedQuery = http.query(request, ReceivedQuery)
    op = received.list_received(cx.dep, q.limit, opt(q.before), opt(q.name))
    return http.json_response(await cx.run(op))


async def put_hook(cx: Context, request: Request) -> Response:
    unbound(request)
    body = await http.decode(request, _hook_decoder)
    hook, created = await cx.run(hooks.put_hook(cx.dep, request.path_params["name"], body))
    return http.json_response(hook, 201 if created else 200)


async def get_hook(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(hooks.get_hook(cx.dep, request.path_params["name"])))


async def list_hooks(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(hooks.list_hooks(cx.dep)))


async def delete_hook(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(hooks.delete_hook(cx.dep, request.path_params["name"])))


async def list_queue_backlogs(cx: Context, request: Request) -> Response:
    return http.json_response(await cx.run(queues.queue_backlogs(cx.dep)))


async def put_queue_backlog(cx: Context, request: Request) -> Response:
    unbound(request)
    body = await http.decode(request, _policy_decoder)
    op = queues.set_queue_backlog(cx.dep, request.path_params["queue"], body)
    return http.json_response(await cx.run(op))


async def delete_queue_backlog(cx: Context, request: Request) -> Response:
    unbound(request)
    op = queues.set_queue_backlog(cx.dep, request.path_params["queue"], BacklogPolicy())
    return http.json_response(await cx.run(op))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/events/received",
        "The events received (emitted or by a hook), newest first, each with its outcome",
        EventPage,
        query=ReceivedQuery,
        errors=(403, 422),
        tags=("events",),
        handler=list_received,
    ),
    Operation(
        "post",
        "/api/v1/events/{event}",
        "Emit an event: stored before it is answered, delivered to every job whose `on`"
        " listens to it (and whose filter its payload passes), answered with its one outcome",
        ReceivedEvent,
        body=EmitRequest,
        body_optional=True,
        errors=BODY_ERRORS,
        tags=("events",),
        handler=emit_event,
    ),
    Operation(
        "get",
        "/api/v1/events/{event}",
        "An event received (by its id): its payload, source and its one outcome",
        ReceivedEvent,
        errors=(403, 404),
        tags=("events",),
        handler=get_event,
    ),
    Operation(
        "post",
        "/api/v1/hooks/{name}",
        "A signed hook request (no token: `Shardsched-Signature: t=<unix s>,v1=<hex"
        " HMAC-SHA256 of '<t>.<body>'>`), received as the hook's event",
        HookReceived,
        errors=(400, 401, 404, 413, 422),
        tags=("hooks",),
        handler=receive_hook,
        scope=None,
    ),
    Operation(
        "put",
        "/api/v1/hooks/{name}",
        "Create or replace a hook: its secrets (two while rotating), its event, where its"
        " requests' idempotency key is",
        Hook,
        body=HookSpec,
        errors=(*BODY_ERRORS, 403),
        tags=("hooks",),
        handler=put_hook,
        scope=Scope.ADMIN,
        operation_id="put_hook",
    ),
    Operation(
        "get",
        "/api/v1/hooks",
        "The hooks (never a secret: how many each has)",
        HookList,
        errors=(403,),
        tags=("hooks",),
        handler=list_hooks,
        scope=Scope.ADMIN,
    ),
    Operation(
        "get",
        "/api/v1/hooks/{name}",
        "A hook (never a secret: how many it has)",
        Hook,
        errors=(403, 404),
        tags=("hooks",),
        handler=get_hook,
        scope=Scope.ADMIN,
    ),
    Operation(
        "delete",
        "/api/v1/hooks/{name}",
        "Delete a hook: its requests are refused from then on (answers what it was)",
        Hook,
        errors=(403, 404),
        tags=("hooks",),
        handler=delete_hook,
        scope=Scope.ADMIN,
    ),
    Operation(
        "get",
        "/api/v1/queues/backlog",
        "Each queue's default backpressure, for its jobs with no backlog of their own",
        QueueBacklogs,
        tags=("queues",),
        handler=list_queue_backlogs,
    ),
    Operation(
        "put",
        "/api/v1/queues/{queue}/backlog",
        "Set a queue's default backpressure (policy queue: none); answers every queue's",
        QueueBacklogs,
        body=BacklogPolicy,
        errors=(*BODY_ERRORS, 403),
        tags=("queues",),
        handler=put_queue_backlog,
    ),
    Operation(
        "delete",
        "/api/v1/queues/{queue}/backlog",
        "Clear a queue's default backpressure; answers every queue's",
        QueueBacklogs,
        errors=(403, 422),
        tags=("queues",),
        handler=delete_queue_backlog,
    ),
)
