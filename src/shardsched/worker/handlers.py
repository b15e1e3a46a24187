"""In-process Python handlers: jobs whose command is ``handler:<name>``.

A handler is an async (trio) or sync function taking a :class:`HandlerContext`; a sync one
runs in a worker thread. Raising fails the run (reason ``handler error: …``); returning
succeeds it. A handler registered with ``inline=True`` must be a quick sync function: the
claim loop calls it directly, with no task, thread or timeout of its own (a task and a
cancel scope per run cost more than a trivial handler). ``noop`` is built in, inline, for
benchmarks and health checks.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import trio

from shardsched.core.apps import app_handler

PREFIX = "handler:"


@dataclass(frozen=True, slots=True)
class HandlerContext:
    run_id: str
    job_id: str
    attempt: int
    scheduled_for_ms: int
    #: the run's args as JSON: a trigger's or its DAG run's, else the job's (``args``)
    args_json: bytes = b"{}"

    @property
    def args(self) -> Any:
        """The run's args, decoded (a trigger's ``args`` replace the job's whole)."""
        return msgspec.json.decode(self.args_json)


Handler = Callable[[HandlerContext], Awaitable[Any] | Any]
_registry: dict[str, Handler] = {}
_inline: set[str] = set()


def handler(name: str, *, inline: bool = False) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler ``name`` (decorator); raises ValueError for an inline
    handler that is not a plain sync function."""

    def register(fn: Handler) -> Handler:
        if inline and inspect.iscoroutinefunction(fn):
            raise ValueError(f"inline handler {name!r} must be a sync function")
        _registry[name] = fn
        if inline:
            _inline.add(name)
        else:
            _inline.discard(name)
        return fn

    return register


def is_inline(command: str) -> bool:
    return command.startswith(PREFIX) and command[len(PREFIX) :] in _inline


def lookup(command: str) -> Handler | None:
    """The handler a ``handler:<name>`` command names; None if it is not a handler command.

    Raises LookupError for a handler command whose name is not registered.
    """
    if not command.startswith(PREFIX):
        return None
    name = command[len(PREFIX) :]
    found = _registry.get(name) or app_handler(name)  # an App's (core/apps.py) if not
    if found is None:
        raise LookupError(f"no handler named {name!r} in this worker") from None
    return found


async def call(fn: Handler, ctx: HandlerContext) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(ctx)
    return await trio.to_thread.run_sync(fn, ctx)


@handler("noop", inline=True)
def noop(ctx: HandlerContext) -> None:
    """Does nothing, at once: the worker's own overhead, measured."""
