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

_TAGS = ("notifications",)
NOTIFY_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/notifications/channels",
        "Notification channels (a webhook's secret and header values are never shown)",
        ChannelList,
        tags=_TAGS,
        handler="list_channels",
        scope=Scope.ADMIN,
    ),
    Operation(
        "put",
        "/api/v1/notifications/channels/{name}",
        "Add or replace a channel: a webhook (JSON, HMAC-signed with its secret) or an"
        " apprise URL (Slack, email, ...)",
        ChannelView,
        200,
        Channel,
        errors=BODY_ERRORS,
        tags=_TAGS,
        handler="put_channel",
        scope=Scope.ADMIN,
    ),
    Operation(
        "delete",
        "/api/v1/notifications/channels/{name}",
        "Remove a channel no rule sends to",
        Removed,
        errors=(404, 409),
        tags=_TAGS,
        handler="delete_channel",
        scope=Scope.ADMIN,
    ),
    Operation(
        "post",
        "/api/v1/notifications/channels/{name}/test",
        "Send a test message over a channel (see it under deliveries)",
        TestSent,
        201,
        errors=(404,),
        tags=_TAGS,
        handler="test_channel",
        scope=Scope.ADMIN,
    ),
    Operation(
        "get",
        "/api/v1/notifications/rules",
        "Notification rules",
        RuleList,
        tags=_TAGS,
        handler="list_rules",
        scope=Scope.ADMIN,
    ),
    Operation(
        "post",
        "/api/v1/notifications/rules",
        "Add a rule: which events (failed, dead_letter, missed, recovered, quarantined,"
        " auto_paused, overrunning, deadline_missed) of which jobs go to which channels",
        RuleView,
        201,
        Rule,
        errors=BODY_ERRORS,
        tags=_TAGS,
        handler="create_rule",
        scope=Scope.ADMIN,
    ),
    Operation(
        "put",
        "/api/v1/notifications/rules/{rule_id}",
        "Replace a rule (or add it under this id)",
        RuleView,
        200,
        Rule,
        errors=BODY_ERRORS,
        tags=_TAGS,
        handler="put_rule",
        scope=Scope.ADMIN,
    ),
    Operation(
        "delete",
        "/api/v1/notifications/rules/{rule_id}",
        "Remove a rule",
        Removed,
        errors=(404,),
        tags=_TAGS,
        handler="delete_rule",
        scope=Scope.ADMIN,
    ),
    Operation(
        "get",
        "/api/v1/notifications/deliveries",
        "Messages, newest first, with every delivery attempt (?channel=, ?state=pending,"
        " retrying, delivered, failed)",
        DeliveryList,
        query=DeliveryQuery,
        errors=(422,),
        tags=_TAGS,
        handler="list_deliveries",
        scope=Scope.ADMIN,
    ),
    Operation(
        "post",
        "/api/v1/notifications/alerts",
        "Alertmanager's webhook: each alert goes to the channels of the rules listening for"
        " `alert` (a token with the write scope)",
        AlertsTaken,
        200,
        AmPayload,
        errors=BODY_ERRORS,
        tags=_TAGS,
        handler="take_alerts",
        scope=Scope.WRITE,
    ),
    Operation(
        "get",
        "/api/v1/notifications/deliveries/{msg_id}",
        "One message: its body and every delivery attempt",
        Delivery,
        errors=(404,),
        tags=_TAGS,
        handler="get_delivery",
        scope=Scope.ADMIN,
    ),
)
