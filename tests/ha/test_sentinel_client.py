"""The trio client on a primary behind Sentinel (issue #53), against a real primary, a
replica and three sentinels: it finds the primary, follows a kill -9 failover, a manual
one (the old primary answers READONLY) and a stopped primary (``+switch-master`` moves it
before any error), and says which primary it uses."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator

import pytest
import trio

from sentinels import new_primary, sentinel_group
from shardsched.runtime.sentinel_group import SentinelGroup, ask_sentinel
from shardsched.store.redis import RedisError, SentinelRedis, connect
from shardsched.store.redis.connection import Redis

pytestmark = pytest.mark.processes


@pytest.fixture
async def group(tmp_path) -> AsyncIterator[SentinelGroup]:  # type: ignore[no-untyped-def]
    async for g in sentinel_group(tmp_path / "ha"):
        yield g


async def _count_until_moved(client: SentinelRedis, old: int, timeout: float = 30) -> list[str]:
    """INCR until a write lands on a primary other than ``old``; the errors seen."""
    errors = []
    with trio.fail_after(timeout):
        while True:
            try:
                await client.execute("INCR", "writes")
                if client.url.port != old:
                    return errors
            except RedisError as exc:
                errors.append(type(exc).__name__)
            await trio.sleep(0.02)  # a client's steady writes, not a wait for a state


async def _role(group: SentinelGroup, port: int) -> bytes:
    server = Redis(group.server_url(port), size=1, retry_for=5)
    try:
        return bytes((await server.execute("ROLE"))[0])
    finally:
        await server.aclose()


async def test_the_client_follows_a_primary_killed(group: SentinelGroup) -> None:
    client = connect(group.url, size=2, retry_for=30)
    assert isinstance(client, SentinelRedis)
    try:
        await client.execute("SET", "before", "1")
        old = group.primary_port
        assert client.url.port == old
        assert f"127.0.0.1:{old}" in client.describe()
        group.procs[old].kill()
        errors = await _count_until_moved(client, old)
        new = await new_primary(group, old)
        assert client.url.port == new and f":{new}" in client.describe()
        assert await client.execute("GET", "before") == b"1"  # replicated before the kill
        # at most the one call sent on a connection that died with the server was lost;
        # every other one waited for the new primary (nothing sent: sent there)
        assert errors.count("RedisConnectionError") <= 2, errors
        assert client.switches == 1
    finally:
        await client.aclose()


async def test_a_demoted_primary_answering_readonly_is_left(group: SentinelGroup) -> None:
    """A manual failover keeps the old primary up, as a replica: the client's connection
    to it answers READONLY (which passes: the call changed nothing) or is closed by it,
    and the next call goes to the new primary. No follow task here: the reply alone
    moves it."""
    client = connect(group.url, size=1, retry_for=30)
    try:
        await client.execute("SET", "k", "v")
        old = group.primary_port
        await ask_sentinel(group.sentinel_ports[0], "failover", "shardsched")
        new = await new_primary(group, old)

        async def demoted() -> bool:
            return await _role(group, old) == b"slave"

        from waits import wait_until

        await wait_until(demoted, timeout=30)
        seen = []
        with trio.fail_after(20):
            while True:
                try:
                    await client.execute("SET", "k", "w")
                    break
                except RedisError as exc:
                    seen.append(type(exc).__name__)
                await trio.sleep(0.05)  # a caller's backoff after a reply that passes
        # READONLY (it passes), or the connection the sentinels had the old primary close
        assert set(seen) <= {"RedisBusyError", "RedisConnectionError"}, seen
        assert client.url.port == new
        assert await client.execute("GET", "k") == b"w"
    finally:
        await client.aclose()


async def test_switch_master_moves_the_client_off_a_stopped_primary(
    group: SentinelGroup,
) -> None:
    """The old primary stopped (SIGSTOP) is the split-brain case seen from here: it is
    alive to TCP but not serving, and would take writes again when continued. The
    sentinels' +switch-master moves the client before it ever sends there again."""
    client = connect(group.url, size=2, retry_for=30)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(client.follow)
            await client.execute("SET", "k", "v")
            old = group.primary_port
            os.kill(group.procs[old].pid, signal.SIGSTOP)
            new = await new_primary(group, old)
            with trio.fail_after(10):
                while client.switches == 0 or client.url.port == old:
                    await client.execute("INCR", "after")  # finds the primary if forgotten
                    await trio.sleep(0.02)  # a client's steady writes
            assert client.url.port == new
            os.kill(group.procs[old].pid, signal.SIGCONT)

            from waits import wait_until

            async def demoted() -> bool:
                return await _role(group, old) == b"slave"

            await wait_until(demoted, timeout=30)
            assert await client.execute("GET", "k") == b"v"
            nursery.cancel_scope.cancel()
    finally:
        await client.aclose()


async def test_no_sentinel_answering_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from shardsched.runtime.redis_server import free_port

    client = connect(f"redis+sentinel://127.0.0.1:{free_port()}/shardsched", retry_for=0.5)
    try:
        with pytest.raises(RedisError, match="no primary for 'shardsched'"):
            await client.execute("PING")
    finally:
        await client.aclose()


async def test_an_unknown_service_is_named(group: SentinelGroup) -> None:
    url = group.url.replace("/shardsched", "/nosuch")
    client = connect(url, retry_for=0.5)
    try:
        with pytest.raises(RedisError, match="knows no 'nosuch'"):
            await client.execute("PING")
    finally:
        await client.aclose()
