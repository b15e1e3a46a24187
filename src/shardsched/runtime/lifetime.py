"""A process's lifetime: run its main task until SIGINT or SIGTERM, print one line once it
is ready, freeze the start-up heap then (:mod:`.heap`), and turn a configuration error into
a message and exit status 2. The first signal may drain gracefully (a worker finishing its
runs); a second one, or one before ready, stops everything at once."""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from shardsched.core.errors import ConfigError
from shardsched.runtime.heap import freeze_startup


def run_until_signal(
    main: Callable[..., Awaitable[Any]],
    ready_line: Callable[[Any], str],
    graceful: Callable[[], None] | None = None,
) -> None:
    """Run ``main`` (a ``task_status`` task) until SIGINT/SIGTERM, printing a line once ready.

    With ``graceful``, the first signal once ready calls it and ``main`` is expected to
    return by itself (a worker draining); a second signal, or any signal before ready (still
    waiting for Redis, say), stops everything at once.
    """
    ready = False

    async def runner() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    first = True
                    async for _ in signals:
                        if graceful is not None and first and ready:
                            first = False
                            graceful()
                        else:
                            nursery.cancel_scope.cancel()

                async def run_main(*, task_status: trio.TaskStatus[Any]) -> None:
                    await main(task_status=task_status)
                    nursery.cancel_scope.cancel()  # it returned by itself: we are done

                nursery.start_soon(watch)
                value = await nursery.start(run_main)
                nonlocal ready
                ready = True
                freeze_startup()
                print(ready_line(value), flush=True)

    try:
        trio.run(runner)
    except* ConfigError as group:
        for exc in _leaves(group):  # each once, however deep the nurseries nested it
            print(f"shardsched: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _leaves(group: BaseExceptionGroup[ConfigError]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return list({str(e): e for e in out}.values())
