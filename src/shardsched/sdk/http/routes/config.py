"""Routes of what jobs refer to: named calendars, notification channels and rules, and
concurrency keys' limits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shardsched.core.calendars import Calendar, CalendarList, CalendarView
from shardsched.core.concurrency import KeyList, KeyView
from shardsched.core.errors import NotFoundError
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
from shardsched.sdk.http.calls import HttpCall, query, segment
from shardsched.sdk.http.routes.jobs import V1
from shardsched.sdk.plans.concurrency import key_checked

NOTIFY = f"{V1}/notifications"


def _gone(what: str) -> Callable[[str], Exception]:
    """An unknown name's exception, as the service answers it (404)."""
    return lambda name: NotFoundError(f"{what} {name!r} not found")


def _channel(name: str) -> str:
    return f"{NOTIFY}/channels/{segment(name, _gone('channel'))}"


def _nothing(decoded: Any, headers: Mapping[str, str]) -> None:
    return None


# calendars


def put_calendar(name: str, calendar: Calendar) -> HttpCall[CalendarView]:
    calendar.check(name)  # as the service checks it: ValidationError at $.name
    return HttpCall(
        "PUT", f"{V1}/calendars/{segment(name, _gone('calendar'))}", CalendarView, body=calendar
    )


def get_calendar(name: str) -> HttpCall[CalendarView]:
    return HttpCall("GET", f"{V1}/calendars/{segment(name, _gone('calendar'))}", CalendarView)


def list_calendars() -> HttpCall[CalendarList]:
    return HttpCall("GET", f"{V1}/calendars", CalendarList)


def delete_calendar(name: str) -> HttpCall[None]:
    return HttpCall(
        "DELETE", f"{V1}/calendars/{segment(name, _gone('calendar'))}", Removed, read=_nothing
    )


# notifications


def put_channel(name: str, channel: Channel) -> HttpCall[ChannelView]:
    channel.check(name)  # as the service checks it: ValidationError
    return HttpCall("PUT", _channel(name), ChannelView, body=channel)


def list_channels() -> HttpCall[ChannelList]:
    return HttpCall("GET", f"{NOTIFY}/channels", ChannelList)


def delete_channel(name: str) -> HttpCall[None]:
    return HttpCall("DELETE", _channel(name), Removed, read=_nothing)


def add_rule(rule: Rule) -> HttpCall[RuleView]:
    return HttpCall("POST", f"{NOTIFY}/rules", RuleView, body=rule)


def put_rule(rule_id: str, rule: Rule) -> HttpCall[RuleView]:
    return HttpCall("PUT", f"{NOTIFY}/rules/{segment(rule_id, _gone('rule'))}", RuleView, body=rule)


def list_rules() -> HttpCall[RuleList]:
    return HttpCall("GET", f"{NOTIFY}/rules", RuleList)


def delete_rule(rule_id: str) -> HttpCall[None]:
    return HttpCall(
        "DELETE", f"{NOTIFY}/rules/{segment(rule_id, _gone('rule'))}", Removed, read=_nothing
    )


def test_channel(name: str) -> HttpCall[str]:
    path = _channel(name) + "/test"
    return HttpCall("POST", path, TestSent, read=lambda sent, _: sent.id)


def list_deliveries(
    limit: int = 50, channel: str | None = None, state: str | None = None
) -> HttpCall[DeliveryList]:
    q = query(limit=limit, channel=channel, state=state)
    return HttpCall("GET", f"{NOTIFY}/deliveries", DeliveryList, q)


def get_delivery(msg_id: str) -> HttpCall[Delivery]:
    return HttpCall("GET", f"{NOTIFY}/deliveries/{segment(msg_id, _gone('message'))}", Delivery)


# concurrency keys


def set_concurrency_limits(
    key: str, limit: int | None = None, rate: tuple[int, float] | None = None
) -> HttpCall[KeyView]:
    body: dict[str, Any] = {}
    body |= {"limit": limit} if limit is not None else {}
    body |= {"rate": {"max": rate[0], "per_s": rate[1]}} if rate is not None else {}
    return HttpCall(
        "PUT",
        f"{V1}/concurrency/{segment(key_checked(key), _gone('concurrency key'))}",
        KeyView,
        body=body,
    )


def clear_concurrency_limits(key: str) -> HttpCall[KeyView]:
    return HttpCall(
        "DELETE", f"{V1}/concurrency/{segment(key_checked(key), _gone('concurrency key'))}", KeyView
    )


def get_concurrency_key(key: str) -> HttpCall[KeyView]:
    return HttpCall(
        "GET", f"{V1}/concurrency/{segment(key_checked(key), _gone('concurrency key'))}", KeyView
    )


def list_concurrency_keys() -> HttpCall[KeyList]:
    return HttpCall("GET", f"{V1}/concurrency", KeyList)
