"""Managing notifications, shared by the API, the SDK and the CLI: channels (where
messages go), rules (which transitions go there), the delivery record, and a test
message. The owners and the dispatcher read the same hashes (shard/follower.py,
shard/dispatcher.py) within seconds of a change."""

from __future__ import annotations

import re
import secrets

import msgspec

from shardsched.core.errors import ConflictError, NotFoundError, ValidationError
from shardsched.core.instants import from_ms
from shardsched.core.notify import Channel, Rule
from shardsched.core.notify_views import (
    ChannelList,
    ChannelView,
    Delivery,
    DeliveryAttempt,
    DeliveryList,
    RuleList,
    RuleView,
)
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import notify as lua
from shardsched.store.records import decoded_entries

_channel = msgspec.json.Decoder(Channel)
_rule = msgspec.json.Decoder(Rule)
MAX_LISTED = 500
_RULE_ID = re.compile(r"^nr_[a-z0-9_-]{1,40}$(?!\n)")
_MSG_ID = re.compile(r"^[a-z0-9-]{1,40}$(?!\n)")


def _rule_view(rule_id: str, r: Rule) -> RuleView:
    return RuleView(
        id=rule_id,
        events=r.events,
        channels=r.channels,
        job_id=r.job_id,
        dag_id=r.dag_id,
        labels=r.labels,
        group_s=r.group_s,
        enabled=r.enabled,
        description=r.description,
    )


def put_channel(dep: Deployment, name: str, channel: Channel) -> Op:
    """Add or replace a channel; returns (ChannelView, created)."""
    channel.check(name)
    (added,) = yield [
        Call(("HSET", dep.globals.notify.channels, name, msgspec.json.encode(channel)))
    ]
    return ChannelView.of(name, channel), check(added) == 1


def list_channels(dep: Deployment) -> Op:
    (raw,) = yield [Call(("HGETALL", dep.globals.notify.channels))]
    views = [ChannelView.of(name, c) for name, c in decoded_entries(check(raw), _channel)]
    return ChannelList(channels=sorted(views, key=lambda v: v.name))


def delete_channel(dep: Deployment, name: str) -> Op:
    """Remove a channel no rule sends to (409 names the rules that do)."""
    raw, exists = yield [
        Call(("HGETALL", dep.globals.notify.rules)),
        Call(("HEXISTS", dep.globals.notify.channels, name)),
    ]
    if not check(exists):
        raise NotFoundError(f"channel {name!r} not found")
    users = [r.id for r in _rules(check(raw)) if name in r.channels]
    if users:
        raise ConflictError(f"channel {name!r} is used by rule(s) {', '.join(users)}")
    yield [Call(("HDEL", dep.globals.notify.channels, name))]


def _rules(raw: list[bytes]) -> list[RuleView]:
    out = [_rule_view(rule_id, r) for rule_id, r in decoded_entries(raw, _rule)]
    return sorted(out, key=lambda r: r.id)


def put_rule(dep: Deployment, rule: Rule, rule_id: str | None = None) -> Op:
    """Create a rule (``rule_id`` None: a new id) or replace one; its channels must exist.
    Returns (RuleView, created)."""
    rule.check()
    if rule_id is not None and not _RULE_ID.match(rule_id):
        raise ValidationError("a rule id is nr_ and 1-40 of a-z 0-9 _ -", "$.id")
    (known,) = yield [Call(("HMGET", dep.globals.notify.channels, *rule.channels))]
    missing = [c for c, v in zip(rule.channels, check(known), strict=True) if v is None]
    if missing:
        raise ValidationError(f"no such channel: {', '.join(missing)}", "$.channels")
    new_id = rule_id or "nr_" + secrets.token_hex(6)
    (added,) = yield [Call(("HSET", dep.globals.notify.rules, new_id, msgspec.json.encode(rule)))]
    return _rule_view(new_id, rule), check(added) == 1


def list_rules(dep: Deployment) -> Op:
    (raw,) = yield [Call(("HGETALL", dep.globals.notify.rules))]
    return RuleList(rules=_rules(check(raw)))


def delete_rule(dep: Deployment, rule_id: str) -> Op:
    (removed,) = yield [Call(("HDEL", dep.globals.notify.rules, rule_id))]
    if not check(removed):
        raise NotFoundError(f"rule {rule_id!r} not found")


def test_channel(dep: Deployment, name: str) -> Op:
    """A test message for channel ``name``, delivered like any other; returns its id."""
    (exists,) = yield [Call(("HEXISTS", dep.globals.notify.channels, name))]
    if not check(exists):
        raise NotFoundError(f"channel {name!r} not found")
    msg_id = "test-" + secrets.token_hex(8)
    body = {
        "id": msg_id,
        "rule": "",
        "title": f"shardsched: a test message for channel {name}",
        "text": "If you read this, the channel works.",
        "total": 0,
        "counts": {},
        "jobs": {},
        "items": [],
        "omitted": 0,
        "test": True,
    }
    (reply,) = yield [
        lua.notify_compose(dep.globals, msg_id, name, "", msgspec.json.encode(body), [])
    ]
    check(reply)
    return msg_id


def _delivery(msg_id: str, raw: list[bytes], attempts: list[bytes], full: bool) -> Delivery:
    f = {raw[i].decode(): raw[i + 1] for i in range(0, len(raw), 2)}
    body = msgspec.json.decode(f.get("body", b"{}"))
    tried = []
    for a in attempts:
        at, outcome, took, answer = a.decode(errors="replace").split("|", 3)
        tried.append(
            DeliveryAttempt(at=from_ms(int(at)), outcome=outcome, took_ms=int(took), answer=answer)
        )
    nxt = f.get("next")
    return Delivery(
        id=msg_id,
        channel=f.get("ch", b"").decode(),
        rule=f.get("rule", b"").decode(),
        state=f.get("st", b"").decode(),
        created_at=from_ms(int(f.get("c", b"0"))),
        attempts=tried,
        next_attempt_at=from_ms(int(nxt)) if nxt else None,
        title=str(body.get("title", "")),
        total=int(body.get("total", 0)),
        body=body if full else None,
    )


def deliveries(
    dep: Deployment, limit: int = 50, channel: str | None = None, state: str | None = None
) -> Op:
    """The newest messages first, with every attempt; filtered by channel and state."""
    if not 1 <= limit <= MAX_LISTED:
        raise ValidationError(f"limit is 1-{MAX_LISTED}", "$.limit")
    g = dep.globals
    (ids,) = yield [Call(("ZRANGE", g.notify.messages, 0, MAX_LISTED * 4, "REV"))]
    out: list[Delivery] = []
    batch = [i.decode() for i in check(ids)]
    for start in range(0, len(batch), 100):
        chunk = batch[start : start + 100]
        calls = []
        for i in chunk:
            calls += [
                Call(("HGETALL", g.notify.message(i))),
                Call(("LRANGE", g.notify.attempts(i), 0, -1)),
            ]
        replies = yield calls
        for n, msg_id in enumerate(chunk):
            raw, attempts = check(replies[2 * n]), check(replies[2 * n + 1])
            if not raw:
                continue
            d = _delivery(msg_id, raw, attempts, False)
            if (channel is None or d.channel == channel) and (state is None or d.state == state):
                out.append(d)
                if len(out) == limit:
                    return DeliveryList(deliveries=out)
    return DeliveryList(deliveries=out)


def delivery(dep: Deployment, msg_id: str) -> Op:
    """One message: its body and every attempt."""
    if not _MSG_ID.match(msg_id):
        raise NotFoundError(f"notification {msg_id!r} not found")
    raw, attempts = yield [
        Call(("HGETALL", dep.globals.notify.message(msg_id))),
        Call(("LRANGE", dep.globals.notify.attempts(msg_id), 0, -1)),
    ]
    if not check(raw):
        raise NotFoundError(f"notification {msg_id!r} not found")
    return _delivery(msg_id, raw, check(attempts), True)
