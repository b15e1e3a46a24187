"""The wrappers of the notification scripts: an owner's cursor on its events
(follow_events.lua), the outbox (notify_enqueue.lua), the dispatcher's lease, its
messages and their delivery attempts."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

from shardsched.store.calls import Call
from shardsched.store.keys import GlobalKeys, ShardKeys
from shardsched.store.lua import signature

FOLLOW_EVENTS = signature(
    "follow_events",
    keys=("epoch", "cursor", "failing"),
    argv=("epoch", "cursor", "adds"),
    item=("*",),
)
NOTIFY_ENQUEUE = signature(
    "notify_enqueue",
    keys=("outbox", "seen"),
    argv=("kept ms",),
    item=("key", "rule", "channel", "kind", "rid", "job", "at", "detail", "worker"),
)
NOTIFY_COMPOSE = signature(
    "notify_compose",
    keys=("outbox", "msgs", "due"),
    argv=("group", "base", "message id", "channel", "rule", "body"),
    item=("*",),
)
NOTIFY_ATTEMPTED = signature(
    "notify_attempted",
    keys=("due",),
    argv=("base", "message id", "outcome", "answer", "took ms", "next ms"),
)
NOTIFY_LEASE = signature("notify_lease", keys=("lease",), argv=("node", "ttl ms"))

#: A match key is remembered this long (a day): the dedupe of re-read events.
SEEN_KEPT_MS = 86_400_000
#: The outbox's consumer group (the dispatcher's).
DISPATCH_GROUP = "dispatch"


def follow_events(
    sk: ShardKeys, epoch: int, cursor: str, failing: Sequence[str], recovered: Sequence[str]
) -> Call:
    """Keep the owner's cursor and its jobs with a failure noted; reply 1, or -1 stale."""
    return FOLLOW_EVENTS.call(
        (sk.epoch, sk.follow_cursor, sk.failing),
        (epoch, cursor, len(failing)),
        [*failing, *recovered],
    )


def notify_enqueue(g: GlobalKeys, matches: Sequence[Sequence[str]]) -> Call:
    """Add matches (9 fields each) not added before; reply how many were."""
    return NOTIFY_ENQUEUE.call(
        (g.notify.outbox, g.notify.seen), (SEEN_KEPT_MS,), list(chain.from_iterable(matches))
    )


def notify_compose(
    g: GlobalKeys, msg_id: str, channel: str, rule: str, body: bytes, entries: Sequence[str]
) -> Call:
    """Keep a message due now and take its matches off the outbox; reply 1 new, 0 kept."""
    return NOTIFY_COMPOSE.call(
        (g.notify.outbox, g.notify.messages, g.notify.due),
        (DISPATCH_GROUP, g.notify.base, msg_id, channel, rule, body),
        list(entries),
    )


def notify_attempted(
    g: GlobalKeys, msg_id: str, outcome: str, answer: str, took_ms: int, next_ms: int = 0
) -> Call:
    """Record a delivery attempt (outcome delivered | retry | failed)."""
    return NOTIFY_ATTEMPTED.call(
        (g.notify.due,), (g.notify.base, msg_id, outcome, answer[:300], took_ms, next_ms)
    )


def notify_lease(g: GlobalKeys, node_id: str, ttl_ms: int) -> Call:
    """Take or keep the dispatcher's lease; reply 1 held, 0 another node holds it."""
    return NOTIFY_LEASE.call((g.notify.lease,), (node_id, ttl_ms))
