"""A queue's default backpressure (core/backlog.py): what a tick, an event or an
upstream's end does to a job of the queue with no ``backlog`` of its own while its runs
are queued past the bound. Set, cleared and listed; nodes read it every second
(shard/queue_backlogs.py), a delivery with the job's definition (store/event_delivery)."""

from __future__ import annotations

import msgspec

from shardsched.core.backlog import Backlog, BacklogPolicy
from shardsched.core.errors import ValidationError
from shardsched.core.queues import QueueName
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment

_policy_decoder = msgspec.json.Decoder(BacklogPolicy)
_queue_decoder = msgspec.json.Decoder(QueueName)


class QueueBacklogs(msgspec.Struct):
    """Each queue's default backpressure, by queue name."""

    queues: dict[str, BacklogPolicy]


def _checked_queue(queue: str) -> None:
    try:
        _queue_decoder.decode(msgspec.json.encode(queue))
    except msgspec.ValidationError as exc:
        raise ValidationError(f"not a queue name: {exc}", "$.queue") from None


def set_queue_backlog(dep: Deployment, queue: str, policy: BacklogPolicy) -> Op:
    """The queue's default (``queue`` policy: none); returns every queue's."""
    _checked_queue(queue)
    if policy.policy != Backlog.QUEUE and policy.max_queued is None and policy.max_age_s is None:
        raise ValidationError(
            f"backlog {policy.policy.value} needs a bound: max_queued, max_age_s or both", "$"
        )
    key = dep.globals.queue_backlogs
    if policy.policy == Backlog.QUEUE:
        yield [Call(("HDEL", key, queue))]
    else:
        yield [Call(("HSET", key, queue, msgspec.json.encode(policy)))]
    return (yield from queue_backlogs(dep))


def queue_backlogs(dep: Deployment) -> Op:
    (raw,) = yield [Call(("HGETALL", dep.globals.queue_backlogs))]
    flat = check(raw)
    pairs = dict(zip(flat[::2], flat[1::2], strict=True)) if isinstance(flat, list) else flat
    return QueueBacklogs({q.decode(): _policy_decoder.decode(v) for q, v in sorted(pairs.items())})
