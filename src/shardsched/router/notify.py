"""Notifications: channels, rules, the delivery record, a test message and Alertmanager's
alerts (admin tokens only: a channel holds a webhook's secret and where messages go)."""

from __future__ import annotations

import os

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.access import Scope
from shardsched.core.notify import Channel, Rule
from shardsched.core.notify_addresses import networks_from, url_refusal
from shardsched.core.notify_views import (
    ChannelList,
    ChannelView,
    Delivery,
    DeliveryList,
    Removed,
    RuleList,
    RuleView,
    TestSent,
)
from shardsched.ops.notify import alerts, manage
from shardsched.ops.notify.alerts import AlertsTaken, AmPayload
from shardsched.router import http
from shardsched.router.context import Context, Handler
from shardsched.router.guards import unbound
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import DeliveryQuery

_channel_decoder = msgspec.json.Decoder(Channel)
_rule_decoder = msgspec.json.Decoder(Rule)
_alerts_decoder = msgspec.json.Decoder(AmPayload)


def _opt(value: object) -> str | None:
    return None if value is msgspec.UNSET else str(value)


def _op(
    method: str,
    path: str,
    summary: str,
    answer: type,
    status: int = 200,
    body: type | None = None,
    *,
    handler: Handler,
    query: type | None = None,
    errors: tuple[int, ...] = (),
    scope: Scope = Scope.ADMIN,
) -> Operation:
    """An operation under ``_BASE``, tagged notifications, for admin tokens unless said."""
    return Operation(
        method,
        _BASE + path,
        summary,
        answer,
        status,
        body,
        query=query,
        errors=errors,
        tags=("notifications",),
        handler=handler,
        scope=scope,
    )


_BASE = "/api/v1/calendars"
_BASE = "/api/v1/notifications"


async def list_channels(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(manage.list_channels(cx.dep)))


async def put_channel(cx: Context, request: Request) -> Response:
    unbound(request)
    body = await http.decode(request, _channel_decoder)
    name = request.path_params["name"]
    why = url_refusal(body.url, networks_from(os.environ))
    if why is not None:
        raise http.ApiError(422, "validation_error", why, {"field": "$.url"})
    view, created = await cx.run(manage.put_channel(cx.dep, name, body))
    return http.json_response(view, 201 if created else 200)


async def delete_channel(cx: Context, request: Request) -> Response:
    unbound(request)
    name = request.path_params["name"]
    await cx.run(manage.delete_channel(cx.dep, name))
    return http.json_response(Removed(removed=name))


async def test_channel(cx: Context, request: Request) -> Response:
    unbound(request)
    msg_id = await cx.run(manage.test_channel(cx.dep, request.path_params["name"]))
    return http.json_response(TestSent(id=msg_id), 201)


async def list_rules(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(manage.list_rules(cx.dep)))


async def create_rule(cx: Context, request: Request) -> Response:
    unbound(request)
    body = await http.decode(request, _rule_decoder)
    view, _ = await cx.run(manage.put_rule(cx.dep, body))
    return http.json_response(view, 201)


async def put_rule(cx: Context, request: Request) -> Response:
    unbound(request)
    body = await http.decode(request, _rule_decoder)
    rule_id = request.path_params["rule_id"]
    view, created = await cx.run(manage.put_rule(cx.dep, body, rule_id))
    return http.json_response(view, 201 if created else 200)


async def delete_rule(cx: Context, request: Request) -> Response:
    unbound(request)
    rule_id = request.path_params["rule_id"]
    await cx.run(manage.delete_rule(cx.dep, rule_id))
    return http.json_response(Removed(removed=rule_id))


async def list_deliveries(cx: Context, request: Request) -> Response:
    unbound(request)
    q: DeliveryQuery = http.query(request, DeliveryQuery)
    op = manage.deliveries(cx.dep, q.limit, _opt(q.channel), _opt(q.state))
    return http.json_response(await cx.run(op))


async def get_delivery(cx: Context, request: Request) -> Response:
    unbound(request)
    msg_id = request.path_params["msg_id"]
    return http.json_response(await cx.run(manage.delivery(cx.dep, msg_id)))


async def take_alerts(cx: Context, request: Request) -> Response:
    body = await http.decode(request, _alerts_decoder)
    return http.json_response(await cx.run(alerts.take_alerts(cx.dep, body)))


ROUTES: tuple[Operation, ...] = (
    _op(
        "get",
        "/channels",
        "Notification channels (a webhook's secret and header values are never shown)",
        ChannelList,
        handler=list_channels,
    ),
    _op(
        "put",
        "/channels/{name}",
        "Add or replace a channel: a webhook (JSON, HMAC-signed with its secret) or an"
        " apprise URL (Slack, email, ...)",
        ChannelView,
        200,
        Channel,
        errors=BODY_ERRORS,
        handler=put_channel,
    ),
    _op(
        "delete",
        "/channels/{name}",
        "Remove a channel no rule sends to",
        Removed,
        errors=(404, 409),
        handler=delete_channel,
    ),
    _op(
        "post",
        "/channels/{name}/test",
        "Send a test message over a channel (see it under deliveries)",
        TestSent,
        201,
        errors=(404,),
        handler=test_channel,
    ),
    _op(
        "get",
        "/rules",
        "Notification rules",
        RuleList,
        handler=list_rules,
    ),
    _op(
        "post",
        "/rules",
        "Add a rule: which events (failed, dead_letter, missed, recovered, quarantined,"
        " auto_paused, overrunning, deadline_missed) of which jobs go to which channels",
        RuleView,
        201,
        Rule,
        errors=BODY_ERRORS,
        handler=create_rule,
    ),
    _op(
        "put",
        "/rules/{rule_id}",
        "Replace a rule (or add it under this id)",
        RuleView,
        200,
        Rule,
        errors=BODY_ERRORS,
        handler=put_rule,
    ),
    _op(
        "delete",
        "/rules/{rule_id}",
        "Remove a rule",
        Removed,
        errors=(404,),
        handler=delete_rule,
    ),
    _op(
        "get",
        "/deliveries",
        "Messages, newest first, with every delivery attempt (?channel=, ?state=pending,"
        " retrying, delivered, failed)",
        DeliveryList,
        query=DeliveryQuery,
        errors=(422,),
        handler=list_deliveries,
    ),
    _op(
        "post",
        "/alerts",
        "Alertmanager's webhook: each alert goes to the channels of the rules listening for"
        " `alert` (a token with the write scope)",
        AlertsTaken,
        200,
        AmPayload,
        errors=BODY_ERRORS,
        handler=take_alerts,
        scope=Scope.WRITE,
    ),
    _op(
        "get",
        "/deliveries/{msg_id}",
        "One message: its body and every delivery attempt",
        Delivery,
        errors=(404,),
        handler=get_delivery,
    ),
)
