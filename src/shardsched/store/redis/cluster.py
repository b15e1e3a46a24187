"""Redis Cluster for the trio client: each call routed by its key's hash slot.

Every shardsched key carries a hash tag (``{<shard>}`` or ``{g}``), so every script call
lives in one slot and a batch is split by node, sent to each node in parallel, and put
back in order. The slot map comes from ``CLUSTER SLOTS``; a ``MOVED`` reply updates it and
the call is sent again to the right node, an ``ASK`` is followed once with ``ASKING``,
``TRYAGAIN`` / ``CLUSTERDOWN`` are waited out. A lost node raises RedisConnectionError
as the single-server client does (the caller's scripts are idempotent, or it says
otherwise) and makes the next call read the slot map again, so a promoted replica is found.
Connections stay O(cluster nodes): one small pool per master.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import hiredis
import trio
from redis.crc import key_slot

from shardsched.store.redis.connection import (
    Command,
    Commands,
    Connection,
    Durable,
    Redis,
    RedisURL,
    _raise_errors,
)
from shardsched.store.redis.errors import RedisConnectError, RedisConnectionError, ReplyError
from shardsched.store.redis.url import redacted

SLOTS = 16384
#: Commands whose first argument is not a key (sent to any node).
_KEYLESS = {
    "TIME", "PUBLISH", "SUBSCRIBE", "CONFIG", "SCRIPT", "FUNCTION", "INFO", "CLUSTER", "PING"
}  # fmt: skip
#: How long TRYAGAIN / CLUSTERDOWN (a failover or migration in progress) is waited out.
_SETTLE_FOR_S = 10.0


CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


def node_url(url: str, host: str, port: int) -> str:
    """The URL of one node of the cluster ``url`` names: its scheme (TLS or not), its
    credentials and its TLS options, at ``host:port``."""
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    auth, at, _hosts = rest.rpartition("@")
    plain = "rediss" if scheme == "rediss+cluster" else "redis"
    return f"{plain}://{auth}{at}{host}:{port}/0" + (f"?{query}" if query else "")


def parse_cluster_url(url: str) -> list[RedisURL]:
    """``redis[s]+cluster://[user:password@]host:port[,host:port…][?tls options]`` → the
    seed nodes (``rediss+cluster`` speaks TLS to every node, with the options of
    :mod:`.tls`)."""
    scheme, sep, rest = url.partition("://")
    if scheme not in ("redis+cluster", "rediss+cluster") or not sep:
        raise ValueError(f"not a redis+cluster:// URL: {redacted(url)!r}")
    rest = rest.partition("?")[0]
    hosts = rest.rpartition("@")[2].split("/", 1)[0]
    seeds = []
    for hostport in hosts.split(","):
        if hostport:
            host, _, port = hostport.rpartition(":")
            seeds.append(RedisURL.parse(node_url(url, host, int(port or 6379))))
    if not seeds:
        raise ValueError(f"no seed node in {redacted(url)!r}")
    return seeds


def command_slot(command: Command) -> int | None:
    """The hash slot a command is about; None for a keyless one."""
    name = str(command[0]).upper() if not isinstance(command[0], bytes) else command[0].decode()
    name = name.upper()
    if name in _KEYLESS:
        return None
    if name in ("FCALL", "FCALL_RO"):
        if int(command[2]) == 0:
            return None
        key = command[3]
    else:
        key = command[1]
    return key_slot(key if isinstance(key, bytes) else str(key).encode())


class ClusterRedis(Commands):
    """The :class:`~shardsched.store.redis.connection.Redis` interface over a Redis Cluster."""

    in_order = False  #: each node's share of a pipeline runs apart, in parallel

    def __init__(
        self, url: str, *, size: int = 4, connect_timeout: float = 5.0, retry_for: float = 10.0
    ) -> None:
        self.seeds = parse_cluster_url(url)
        self.url = self.seeds[0]
        self._cluster_url = url
        self._size, self._timeout, self._retry_for = size, connect_timeout, retry_for
        self._pools: dict[tuple[str, int], Redis] = {}
        self._slots: list[tuple[str, int] | None] = [None] * SLOTS
        self._stale = True
        self._refresh_lock = trio.Lock()
        self._closed = False
        self._durable: Durable | None = None

    def _pool(self, addr: tuple[str, int]) -> Redis:
        pool = self._pools.get(addr)
        if pool is None:
            pool = self._pools[addr] = Redis(
                node_url(self._cluster_url, addr[0], addr[1]),
                size=self._size,
                connect_timeout=self._timeout,
                retry_for=min(self._retry_for, 2.0),
            )
            pool.set_durability(self._durable)
        return pool

    def set_durability(self, durable: Durable | None) -> None:
        """Each master's share of a call waits for that master's replicas."""
        self._durable = durable
        for pool in self._pools.values():
            pool.set_durability(durable)

    async def _refresh(self) -> None:
        """Read the slot map from the first node that answers (known masters, then seeds)."""
        async with self._refresh_lock:
            if not self._stale:
                return
            candidates = list(
                dict.fromkeys(
                    [a for a in self._slots if a is not None]
                    + [(s.host, s.port) for s in self.seeds]
                )
            )
            last: Exception | None = None
            deadline = trio.current_time() + self._retry_for
            while True:
                for addr in candidates:
                    try:
                        ranges = await self._cluster_slots(addr)
                    except (RedisConnectionError, ReplyError) as exc:
                        last = exc
                        continue
                    slots: list[tuple[str, int] | None] = [None] * SLOTS
                    for start, end, master, *_replicas in ranges:
                        host = master[0].decode() or addr[0]
                        for slot in range(int(start), int(end) + 1):
                            slots[slot] = (host, int(master[1]))
                    self._slots = slots
                    self._stale = False
                    return
                if trio.current_time() > deadline:
                    raise RedisConnectionError(f"no cluster node answers: {last}")
                await trio.sleep(0.2)

    async def _cluster_slots(self, addr: tuple[str, int]) -> Any:
        """CLUSTER SLOTS from one node on a connection of its own, given little time: a dead
        node must not hold up finding the living."""
        seed = self.seeds[0]
        url = RedisURL(addr[0], addr[1], seed.username, seed.password, tls=seed.tls)
        conn = await Connection.open(url, min(self._timeout, 0.5), scripts=False)
        try:
            return _raise_errors(await conn.execute_many([("CLUSTER", "SLOTS")]))[0]
        finally:
            await conn.aclose()

    @property
    def cluster_url(self) -> str:
        return self._cluster_url

    def describe(self) -> str:
        masters = len({a for a in self._slots if a is not None})
        seeds = ", ".join(f"{s.host}:{s.port}" for s in self.seeds)
        return f"cluster of {masters} masters (seeds {seeds})"

    async def url_of_key(self, key: str) -> RedisURL:
        host, port = await self.node_of_key(key)
        return RedisURL.parse(node_url(self._cluster_url, host, port))

    async def node_of_key(self, key: str) -> tuple[str, int]:
        """The master that holds ``key``'s slot (reading the slot map when stale)."""
        if self._stale:
            await self._refresh()
        return self._node_of(key_slot(key.encode()))

    async def load_functions(self, key: str | None) -> None:
        """Every library on the master that holds ``key`` (each master has its own)."""
        addr = await self.node_of_key(key) if key else self._node_of(None)
        await self._pool(addr).load_functions(key)

    def _node_of(self, slot: int | None) -> tuple[str, int]:
        if slot is None:
            known = [a for a in self._slots if a is not None]
            return known[0] if known else (self.seeds[0].host, self.seeds[0].port)
        addr = self._slots[slot]
        if addr is None:
            self._stale = True
            return (self.seeds[0].host, self.seeds[0].port)
        return addr

    async def replies(self, commands: Sequence[Command]) -> list[Any]:
        """Every command on its slot's node (one round trip per node, in parallel); error
        replies come back in place as values, redirections followed."""
        if self._closed:
            raise RedisConnectionError("client is closed")
        replies: list[Any] = [None] * len(commands)
        todo = list(range(len(commands)))
        asking: dict[int, tuple[str, int]] = {}
        deadline = trio.current_time() + _SETTLE_FOR_S
        while todo:
            if self._stale:
                await self._refresh()
            groups: dict[tuple[str, int], list[int]] = {}
            for i in todo:
                addr = asking.get(i) or self._node_of(command_slot(commands[i]))
                groups.setdefault(addr, []).append(i)
            failed: list[BaseException] = []
            async with trio.open_nursery() as nursery:
                for addr, idx in groups.items():
                    nursery.start_soon(
                        self._send_group, addr, idx, commands, dict(asking), replies, failed
                    )
            if failed:
                self._stale = True
                lost = [e for e in failed if not isinstance(e, RedisConnectError)]
                if lost or trio.current_time() > deadline:
                    raise RedisConnectionError(f"cluster node lost: {failed[0]}")
                # nothing was sent to the node that could not be reached: find who serves
                # its slots now (a promoted replica) and send there
                await trio.sleep(0.1)
                continue
            asking = {}
            again = []
            for i in todo:
                reply = replies[i]
                if not isinstance(reply, hiredis.ReplyError):
                    continue
                text = str(reply)
                kind, _, rest = text.partition(" ")
                if kind in ("MOVED", "ASK"):
                    slot_text, _, target = rest.partition(" ")
                    host, _, port = target.rpartition(":")
                    addr = (host or self.seeds[0].host, int(port))
                    if kind == "MOVED":
                        self._slots[int(slot_text)] = addr
                        self._stale = True  # more slots probably moved with it
                    else:
                        asking[i] = addr
                    again.append(i)
                elif kind in ("TRYAGAIN", "CLUSTERDOWN"):
                    again.append(i)
            if again and trio.current_time() > deadline:
                break  # give the error replies back as they are
            if (
                again
                and not asking
                and all(str(replies[i]).startswith(("TRYAGAIN", "CLUSTERDOWN")) for i in again)
            ):
                await trio.sleep(0.1)
            todo = again
        return replies

    async def _send_group(
        self,
        addr: tuple[str, int],
        idx: list[int],
        commands: Sequence[Command],
        asking: dict[int, tuple[str, int]],
        replies: list[Any],
        failed: list[BaseException],
    ) -> None:
        """One node's share of a batch, in one round trip; replies put in place."""
        batch: list[Command] = []
        for i in idx:
            if i in asking:
                batch.append(("ASKING",))
            batch.append(commands[i])
        try:
            out = await self._pool(addr).replies(batch)
        except RedisConnectionError as exc:
            self._stale = True
            failed.append(exc)
            return
        pos = 0
        for i in idx:
            if i in asking:
                pos += 1  # the ASKING reply
            replies[i] = out[pos]
            pos += 1

    async def subscribe(self, *channels: str) -> AsyncIterator[bytes | None]:
        """Pub/sub on any node (classic pub/sub is cluster-wide); another one after a loss."""
        while True:
            if self._stale:
                try:
                    await self._refresh()
                except RedisConnectionError:
                    await trio.sleep(0.2)
                    continue
            pool = self._pool(self._node_of(None))
            async for message in pool.subscribe_once(*channels):
                yield message
            self._stale = True

    async def aclose(self) -> None:
        self._closed = True
        for pool in self._pools.values():
            await pool.aclose()
