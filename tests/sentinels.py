"""Test helper: a primary, a replica and three sentinels on loopback, with the servers'
writes reported to the suite's waits (tests/waits.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator

import waits
from shardsched.runtime.redis_server import stop_process
from shardsched.runtime.sentinel_group import SentinelGroup, ask_sentinel, start_sentinel_group


async def sentinel_group(root) -> AsyncIterator[SentinelGroup]:  # type: ignore[no-untyped-def]
    group = await start_sentinel_group(root, extra_args=waits.NOTIFY_ARGS)
    urls = [group.server_url(p) for p in [group.primary_port, *group.replica_ports]]
    for url in urls:
        waits.watch(url)
    try:
        yield group
    finally:
        for url in urls:
            waits.unwatch(url)
        for proc in group.procs.values():
            if proc.returncode is None:
                os.kill(proc.pid, signal.SIGCONT)  # a stopped one ends too
            await stop_process(proc, grace=2)


async def all_sentinels_name(group: SentinelGroup, port: int, timeout: float = 20) -> None:
    """Until every sentinel names ``port`` primary (the failover is over)."""

    async def named() -> bool:
        for p in group.sentinel_ports:
            reply = await ask_sentinel(p, "get-master-addr-by-name", "shardsched")
            if int(reply[1]) != port:
                return False
        return True

    await waits.wait_until(named, timeout=timeout)


async def new_primary(group: SentinelGroup, old: int, timeout: float = 30) -> int:
    """The port the sentinels promote after ``old`` fails."""

    async def promoted() -> int | None:
        port = await group.primary()
        return port if port != old else None

    port = await waits.wait_until(promoted, timeout=timeout)
    await all_sentinels_name(group, port, timeout)
    return port
