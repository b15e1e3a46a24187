"""What the API answers about notifications: channels (a webhook's secret, and any part
of a URL that may be a credential, never shown),
rules, and the delivery record of each message."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec

from shardsched.core.notify import Channel, Kind, valid_host


class ChannelView(msgspec.Struct, kw_only=True):
    name: str
    kind: Literal["webhook", "apprise"]
    url: str
    signed: bool  #: a webhook with a secret (the secret itself is never answered)
    headers: list[str]  #: the names of its extra headers (their values are not answered)
    max_per_minute: int
    max_attempts: int
    retry_base_s: float
    timeout_s: float

    @classmethod
    def of(cls, name: str, c: Channel) -> ChannelView:
        return cls(
            name=name,
            kind=c.kind,
            url=shown_url(c),
            signed=bool(c.secret),
            headers=sorted(c.headers),
            max_per_minute=c.max_per_minute,
            max_attempts=c.max_attempts,
            retry_base_s=c.retry_base_s,
            timeout_s=c.timeout_s,
        )


def shown_url(c: Channel) -> str:
    """A channel's URL as the API shows it, with nothing in it that could be a credential:
    an apprise URL as its scheme (its tokens and passwords are the rest of it), a webhook
    as its origin (a user and password, a token in the query, or a path that is itself
    the secret, as a Slack incoming webhook's, never come back)."""
    if c.kind == "apprise":
        return c.url.split("://", 1)[0] + "://…"
    if not valid_host(c.url):  # stored before hosts were checked: nothing of it shown
        return urlsplit(c.url).scheme + "://…"
    parts = urlsplit(c.url)
    host, port = parts.hostname or "", parts.port
    shown = f"{parts.scheme}://{'[' + host + ']' if ':' in host else host}"
    shown += f":{port}" if port else ""
    rest = parts.path not in ("", "/") or parts.query or parts.fragment or parts.username
    return shown + ("/…" if rest else "/")


class ChannelList(msgspec.Struct, kw_only=True):
    channels: list[ChannelView]


class RuleView(msgspec.Struct, kw_only=True):
    id: str
    events: list[Kind]
    channels: list[str]
    job_id: str | None
    dag_id: str | None
    labels: dict[str, str]
    group_s: float
    enabled: bool
    description: str


class RuleList(msgspec.Struct, kw_only=True):
    rules: list[RuleView]


class DeliveryAttempt(msgspec.Struct, kw_only=True):
    at: datetime
    outcome: str  #: delivered | retry | failed
    took_ms: int
    answer: str  #: the receiver's answer (an HTTP status) or the error


class Delivery(msgspec.Struct, kw_only=True):
    id: str  #: the message id (a webhook's Idempotency-Key)
    channel: str
    rule: str
    state: str  #: pending | retrying | delivered | failed
    created_at: datetime
    attempts: list[DeliveryAttempt]
    next_attempt_at: datetime | None
    title: str
    total: int  #: matches the message carries
    body: dict[str, Any] | None = None  #: the message itself (asked for by id)


class DeliveryList(msgspec.Struct, kw_only=True):
    deliveries: list[Delivery]


class Removed(msgspec.Struct, kw_only=True):
    """A channel or rule removed."""

    removed: str


class TestSent(msgspec.Struct, kw_only=True):
    """A test message made: its delivery shows under its id within seconds."""

    id: str
