"""Calls and the operation protocol: how an operation talks to Redis without doing I/O.

An operation (``Op``) is a generator that yields a batch of :class:`Call` (one round trip,
pipelined) and receives the list of replies; its return value is the result. The router,
shard actors and workers drive operations on the trio client (``store/drive.py``), the
SDK on redis-py (``shardsched.sdk``), tests on canned replies: one definition of what a
job is in Redis, the same Lua scripts on every path. This module does no I/O and imports
no trio (an import-linter contract keeps it, and ops/, so).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from shardsched.core.errors import RedisUnavailable, ShardschedError, is_transient_reply


@dataclass(frozen=True, slots=True)
class Call:
    """One command (``script`` is None) or one Lua script call, for a pipeline.
    ``refusable``: the operation reads a refusal of this call (NOPERM, READONLY, OOM...)
    as data; every other call's refusal raises in the driver (:func:`refusal`)."""

    args: tuple[Any, ...]
    script: str | None = None
    keys: tuple[str, ...] = ()
    refusable: bool = False


class ScriptReplyError(ShardschedError):
    """Raised when Redis answers one of our calls with an error reply."""


Op = Generator[list[Call], list[Any], Any]


def check(reply: Any) -> Any:
    """The reply itself; raises RedisUnavailable for a transient error reply (OOM, LOADING,
    BUSY, ...), ScriptReplyError for any other."""
    if isinstance(reply, Exception):
        if is_transient_reply(str(reply)):
            raise RedisUnavailable(str(reply))
        raise ScriptReplyError(str(reply))
    return reply


def server_ms(reply: Any) -> int:
    """Milliseconds from a ``TIME`` reply."""
    return int(reply[0]) * 1000 + int(reply[1]) // 1000


#: Error replies that say the server answers no command at all right now (a script runs
#: past its time limit, the data set is loading, the cluster is down or moving a slot).
#: OOM, READONLY and NOPERM refuse only some commands: an operation may read those replies
#: as data (open_deployment ignores a refused HSETNX) and is left to.
UNSERVED_REPLIES = ("BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN")


def unless_unserved(replies: list[Any]) -> list[Any]:
    """The replies, for an operation to read; raises RedisUnavailable when one of them says
    the server serves nothing now (:data:`UNSERVED_REPLIES`). An operation reads its
    replies as data: such a reply would otherwise end it with a TypeError (a 500), where
    the caller should hear "come back later" (a 503 with the reason)."""
    for reply in replies:
        if isinstance(reply, Exception) and str(reply).split(" ", 1)[0] in UNSERVED_REPLIES:
            raise RedisUnavailable(str(reply))
    return replies


def refusal(calls: Sequence[Call], replies: Sequence[Any]) -> str | None:
    """The first error reply that refuses a call for a reason that passes or that only an
    operator can fix (``core.errors.TRANSIENT_REPLIES``: BUSY, LOADING, OOM, READONLY,
    MASTERDOWN, NOPERM, ...), unless its call is ``refusable``; None when there is none.

    The one place where replies are checked before an operation or a typed wrapper reads
    them: every driver (the trio one in ``store/drive``, the SDK's on redis-py) raises on
    it, so no decoder ever takes such a reply for data (a ``len()`` of a ReplyError once
    ended the node). Other error replies (NOGROUP of a stream never read, say) stay values
    that the operations read."""
    for call, reply in zip(calls, replies, strict=False):
        if isinstance(reply, Exception) and not call.refusable:
            text = str(reply)
            if is_transient_reply(text):
                return text
    return None


def advance(op: Op, replies: list[Any] | None) -> tuple[bool, Any]:
    """One step of an operation: (False, its next calls) or (True, its result)."""
    try:
        return False, (next(op) if replies is None else op.send(replies))
    except StopIteration as stop:
        return True, stop.value
