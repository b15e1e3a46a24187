"""A managed primary endpoint (issue #53): a DNS name that moves to the new primary after
a failover. The client resolves the name at each connect, and a demoted primary's READONLY
closes its connections, so the next call lands on the new one. The name is a local alias
(trio's hostname resolver, the one ``open_tcp_stream`` asks) over two servers on 127.0.0.2
and 127.0.0.3."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import AsyncIterator

import pytest
import trio

from conftest import wait_until
from shardsched.runtime.redis_server import free_port, redis_server_args, spawn, stop_process
from shardsched.store.redis import Redis, RedisBusyError

pytestmark = pytest.mark.processes
NAME = "primary.redis.test"


class Alias(trio.abc.HostnameResolver):
    """``NAME`` → ``self.address``; any other name as the system resolves it."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.asked = 0

    async def getaddrinfo(self, host, port, family=0, type=0, proto=0, flags=0):  # type: ignore[no-untyped-def]
        name = host.decode() if isinstance(host, bytes) else host
        if name == NAME:
            self.asked += 1
            name = self.address
        return socket.getaddrinfo(name, port, family, type, proto, flags)

    async def getnameinfo(self, sockaddr, flags):  # type: ignore[no-untyped-def]
        return socket.getnameinfo(sockaddr, flags)


@pytest.fixture
async def pair(tmp_path) -> AsyncIterator[int]:  # type: ignore[no-untyped-def]
    port = free_port()  # free on 127.0.0.1; 127.0.0.2 and .3 are other addresses
    procs = []
    for host, replica_of in (("127.0.0.2", None), ("127.0.0.3", "127.0.0.2")):
        data = tmp_path / host
        data.mkdir()
        args = [*redis_server_args(port, data, "always"), "--bind", host]
        if replica_of:
            args += ["--replicaof", replica_of, str(port)]
        procs.append(await spawn(args, stdout=subprocess.DEVNULL))
    try:
        yield port
    finally:
        for proc in procs:
            await stop_process(proc, grace=2)


async def test_a_name_that_moves_is_followed(pair: int) -> None:
    port = pair
    a = Redis(f"redis://127.0.0.2:{port}/0", size=1, retry_for=10, log_failures=False)
    b = Redis(f"redis://127.0.0.3:{port}/0", size=1, retry_for=10, log_failures=False)
    alias = Alias("127.0.0.2")
    trio.socket.set_custom_hostname_resolver(alias)
    client = Redis(f"redis://{NAME}:{port}/0", size=2, retry_for=10)
    try:

        async def in_sync() -> bool:
            return b"master_link_status:up" in await b.execute("INFO", "replication")

        await wait_until(in_sync, timeout=30)
        await client.execute("SET", "k", "v")
        assert await a.execute("WAIT", 1, 5000) == 1  # on the replica too
        # the provider's failover: the replica promoted, the old primary demoted, the name
        # moved
        await b.execute("REPLICAOF", "NO", "ONE")
        await a.execute("REPLICAOF", "127.0.0.3", str(port))
        alias.address = "127.0.0.3"
        asked = alias.asked
        with pytest.raises(RedisBusyError, match="READONLY"):
            await client.execute("SET", "k", "w")  # the old connection: it passes
        await client.execute("SET", "k", "w")  # a new connection, the name resolved again
        assert alias.asked > asked
        assert await b.execute("GET", "k") == b"w"
        assert (await b.execute("ROLE"))[0] == b"master"
    finally:
        trio.socket.set_custom_hostname_resolver(None)
        for c in (client, a, b):
            await c.aclose()
