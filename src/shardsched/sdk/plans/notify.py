"""Plans on notifications: channels, rules, a test message and the delivery record."""

from __future__ import annotations

from shardsched.core.notify import Channel, Rule
from shardsched.core.notify_views import (
    ChannelList,
    ChannelView,
    Delivery,
    DeliveryList,
    RuleList,
    RuleView,
)
from shardsched.ops.notify import manage
from shardsched.sdk.plans import Handle, Plan, page_size
from shardsched.store.calls import Op


def put_channel(c: Handle, name: str, channel: Channel) -> Plan[ChannelView]:
    """Add or replace a channel (a webhook, or an apprise URL)."""

    def op() -> Op:
        view, _ = yield from manage.put_channel(c.deployment, name, channel)
        return view

    return Plan(op())


def list_channels(c: Handle) -> Plan[ChannelList]:
    return Plan(manage.list_channels(c.deployment))


def delete_channel(c: Handle, name: str) -> Plan[None]:
    """Remove a channel no rule sends to (ConflictError names the rules that do)."""
    return Plan(manage.delete_channel(c.deployment, name))


def add_rule(c: Handle, rule: Rule) -> Plan[RuleView]:
    """A new rule: which events of which jobs go to which channels."""

    def op() -> Op:
        view, _ = yield from manage.put_rule(c.deployment, rule)
        return view

    return Plan(op())


def put_rule(c: Handle, rule_id: str, rule: Rule) -> Plan[RuleView]:
    def op() -> Op:
        view, _ = yield from manage.put_rule(c.deployment, rule, rule_id)
        return view

    return Plan(op())


def list_rules(c: Handle) -> Plan[RuleList]:
    return Plan(manage.list_rules(c.deployment))


def delete_rule(c: Handle, rule_id: str) -> Plan[None]:
    return Plan(manage.delete_rule(c.deployment, rule_id))


def test_channel(c: Handle, name: str) -> Plan[str]:
    """Send a test message over a channel; returns its id (see :func:`get_delivery`)."""
    return Plan(manage.test_channel(c.deployment, name))


def list_deliveries(
    c: Handle, limit: int = 50, channel: str | None = None, state: str | None = None
) -> Plan[DeliveryList]:
    """Messages, newest first, with every delivery attempt."""
    page_size(limit, 500)
    return Plan(manage.deliveries(c.deployment, limit, channel, state))


def get_delivery(c: Handle, msg_id: str) -> Plan[Delivery]:
    return Plan(manage.delivery(c.deployment, msg_id))
