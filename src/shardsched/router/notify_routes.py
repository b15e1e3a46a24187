"""The routes of notifications: channels, rules, the delivery record and a test message
(admin tokens only: a channel holds a webhook's secret and where messages go). Part of the
route table (:mod:`.routes`)."""

from __future__ import annotations

from shardsched.core.access import Scope
from shardsched.core.notify import Channel, Rule
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
from shardsched.ops.notify_alerts import AlertsTaken, AmPayload
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import DeliveryQuery

_BASE = "/api/v1/notifications"


def _op(
    method: str,
    path: str,
    summary: str,
    answer: type,
    status: int = 200,
    body: type | None = None,
    *,
    handler: str,
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


NOTIFY_OPERATIONS: tuple[Operation, ...] = (
    _op(
        "get",
        "/channels",
        "Notification channels (a webhook's secret and header values are never shown)",
        ChannelList,
        handler="list_channels",
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
        handler="put_channel",
    ),
    _op(
        "delete",
        "/channels/{name}",
        "Remove a channel no rule sends to",
        Removed,
        errors=(404, 409),
        handler="delete_channel",
    ),
    _op(
        "post",
        "/channels/{name}/test",
        "Send a test message over a channel (see it under deliveries)",
        TestSent,
        201,
        errors=(404,),
        handler="test_channel",
    ),
    _op(
        "get",
        "/rules",
        "Notification rules",
        RuleList,
        handler="list_rules",
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
        handler="create_rule",
    ),
    _op(
        "put",
        "/rules/{rule_id}",
        "Replace a rule (or add it under this id)",
        RuleView,
        200,
        Rule,
        errors=BODY_ERRORS,
        handler="put_rule",
    ),
    _op(
        "delete",
        "/rules/{rule_id}",
        "Remove a rule",
        Removed,
        errors=(404,),
        handler="delete_rule",
    ),
    _op(
        "get",
        "/deliveries",
        "Messages, newest first, with every delivery attempt (?channel=, ?state=pending,"
        " retrying, delivered, failed)",
        DeliveryList,
        query=DeliveryQuery,
        errors=(422,),
        handler="list_deliveries",
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
        handler="take_alerts",
        scope=Scope.WRITE,
    ),
    _op(
        "get",
        "/deliveries/{msg_id}",
        "One message: its body and every delivery attempt",
        Delivery,
        errors=(404,),
        handler="get_delivery",
    ),
)
