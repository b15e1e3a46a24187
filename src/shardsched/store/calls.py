"""Calls and the operation protocol: how an operation talks to Redis without doing I/O.

An operation (``Op``) is a generator that yields a batch of :class:`Call` (one round trip,
pipelined) and receives the list of replies; its return value is the result. The router,
shard actors and workers drive operations on the trio client (:func:`drive_async`), the SDK
on redis-py (``shardsched.sdk``): one definition of what a job is in Redis, the same Lua
scripts on both paths.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from shardsched.core.errors import RedisUnavailable, ShardschedError, is_transient_reply

if TYPE_CHECKING:
    from shardsched.store.redis import Redis


@dataclass(frozen=True, slots=True)
class Call:
    """One command (``script`` is None) or one Lua script call, for a pipeline."""

    args: tuple[Any, ...]
    script: str | None = None
    keys: tuple[str, ...] = ()


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


async def call_script(redis: Redis, call: Call) -> Any:
    """One script call on the trio client; an error reply raises (a ReplyError)."""
    assert call.script is not None
    return await redis.script(call.script, call.keys, call.args)


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


async def drive_async(op: Op, redis: Redis) -> Any:
    """Run an operation on the trio connection pool."""
    try:
        calls = next(op)
        while True:
            replies = unless_unserved(await redis_calls(redis, calls))
            calls = op.send(replies)
    except StopIteration as stop:
        return stop.value


async def redis_calls(redis: Redis, calls: Sequence[Call]) -> list[Any]:
    """One round trip for a mixed batch of commands and scripts; errors come back as values."""
    if all(c.script is None for c in calls):
        return await redis.pipeline([c.args for c in calls])
    if all(c.script is not None for c in calls):
        return await redis.scripts([(c.script or "", c.keys, c.args) for c in calls])
    return [(await redis_calls(redis, [c]))[0] for c in calls]


def _advance(op: Op, replies: list[Any] | None) -> tuple[bool, Any]:
    """One step of an operation: (False, its next calls) or (True, its result)."""
    try:
        return False, (next(op) if replies is None else op.send(replies))
    except StopIteration as stop:
        return True, stop.value


async def drive_off_loop(op: Op, redis: Redis) -> Any:
    """:func:`drive_async`, with each of the operation's pure steps in a worker thread.

    The API shares its trio loop with the node's shard actors: a heavy step (enumerating
    ticks, a 10,000-tick backfill, validating a dense DAG, a long preview, a read of the
    cold archive) run on the loop would hold up lease renewals and firing for as long as
    it takes. In a thread it only shares the GIL, which the loop gets back every switch
    interval (5 ms). The async SDK drives its operations so too."""
    done, value = await trio.to_thread.run_sync(_advance, op, None)
    while not done:
        replies = unless_unserved(await redis_calls(redis, value))
        done, value = await trio.to_thread.run_sync(_advance, op, replies)
    return value
