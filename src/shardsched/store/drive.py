"""Drivers of the operation protocol (``store/calls.py``) on the trio Redis client: the
I/O half, kept apart so that operations (ops/) cannot reach it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio

from shardsched.store.calls import Call, Op, advance, refusal, unless_unserved
from shardsched.store.redis.errors import RedisBusyError

if TYPE_CHECKING:
    from shardsched.store.redis import Redis


async def call_script(redis: Redis, call: Call) -> Any:
    """One script call on the trio client; an error reply raises (a ReplyError)."""
    assert call.script is not None
    return await redis.script(call.script, call.keys, call.args)


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
    """One round trip for a batch of commands and scripts (scripts first, then commands:
    one write; mixed otherwise, one call at a time). A refusal (BUSY, LOADING, OOM,
    READONLY, NOPERM, ...: ``calls.refusal``) raises RedisBusyError, a RedisError that
    every process's loop waits out; any other error reply comes back as a value, for the
    typed wrapper's decoder to read (``calls.check``)."""
    if all(c.script is None for c in calls):
        replies = await redis.replies([c.args for c in calls])
    else:
        scripts = [(c.script, c.keys, c.args) for c in calls if c.script is not None]
        if all(c.script is None for c in calls[len(scripts) :]):
            replies = await redis.scripts(scripts, then=[c.args for c in calls[len(scripts) :]])
        else:
            replies = [(await redis_calls(redis, [c]))[0] for c in calls]
    refused = refusal(calls, replies)
    if refused is not None:
        raise RedisBusyError(refused)
    return replies


async def drive_off_loop(op: Op, redis: Redis) -> Any:
    """:func:`drive_async`, with each of the operation's pure steps in a worker thread.

    The API shares its trio loop with the node's shard actors: a heavy step (enumerating
    ticks, a 10,000-tick backfill, validating a dense DAG, a long preview, a read of the
    cold archive) run on the loop would hold up lease renewals and firing for as long as
    it takes. In a thread it only shares the GIL, which the loop gets back every switch
    interval (5 ms). The async SDK drives its operations so too."""
    done, value = await trio.to_thread.run_sync(advance, op, None)
    while not done:
        replies = unless_unserved(await redis_calls(redis, value))
        done, value = await trio.to_thread.run_sync(advance, op, replies)
    return value
