"""A primary behind Redis Sentinel for the trio client: found, followed, and never trusted
blindly.

``redis+sentinel://[user:password@]host:port[,host:port…]/service[/db][?options]`` names
the sentinels and the service (``rediss+sentinel://`` speaks TLS to the sentinels and the
servers, with the options of :mod:`.tls`; ``sentinel_username`` / ``sentinel_password``
authenticate to sentinels that want it; the URL's user and password are the servers').

The client asks the sentinels which server is the primary, checks with ``ROLE`` that it
says so itself (a sentinel may answer mid-failover), and sends everything to a pool on it.
It finds the primary again when a call could not reach it (nothing was sent: the call is
sent to the new one), when a connection is lost half-way (raised to the caller, as the
single-server client does: it may have run), when a server answers READONLY or LOADING (a
demoted or restarting server: the reply passes, the caller backs off and retries), and when
a sentinel announces ``+switch-master`` (:meth:`SentinelRedis.follow`, run by every
long-lived process). The switch is logged, and ``describe`` says which primary is in use.

A split brain (the old primary cut off from its sentinels and replicas but not from us)
is closed by ``+switch-master``: after it nothing more is sent to the old primary. Writes
it took before that are lost when it rejoins as a replica; the durable mode
(``WAIT``, :mod:`shardsched.store.durable`) is what keeps such writes from being taken
for done.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import hiredis
import trio

from shardsched.store.redis.connection import (
    Command,
    Commands,
    Connection,
    Durable,
    Redis,
    RedisURL,
)
from shardsched.store.redis.errors import (
    RedisConnectError,
    RedisConnectionError,
    RedisNotDurable,
    refusal,
)
from shardsched.store.redis.tls import parse_options
from shardsched.store.redis.url import redacted

SENTINEL_SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
#: Error replies that mean "this server is not (or not yet) the primary: find it again".
_NOT_PRIMARY = frozenset({"READONLY", "LOADING", "MASTERDOWN"})
_SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
_SERVICE = re.compile(r"[A-Za-z0-9._-]{1,200}")
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]|[0-9A-Fa-f:.]{2,45}")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SentinelURL:
    sentinels: tuple[RedisURL, ...]  #: how to reach each sentinel
    service: str  #: the name the sentinels monitor the primary under
    server: RedisURL  #: credentials, db and TLS for the servers (host and port: none yet)

    @classmethod
    def parse(cls, url: str) -> SentinelURL:
        """Parse a ``redis[s]+sentinel://`` URL (module docstring); raises ValueError,
        saying what is wrong without the passwords."""
        shown = redacted(url)
        scheme, sep, rest = url.partition("://")
        if scheme not in ("redis+sentinel", "rediss+sentinel") or not sep:
            raise ValueError(f"not a redis+sentinel:// URL: {shown!r}")
        if any(c.isspace() or not c.isprintable() for c in url):
            raise ValueError(f"a space or control character in {shown!r}")
        rest, _, query = rest.partition("?")
        auth, _, location = rest.rpartition("@")
        hosts, _, path = location.partition("/")
        service, _, db_text = path.partition("/")
        service = unquote(service)
        if not service:
            raise ValueError(f"a sentinel URL names its service: …/SERVICE, in {shown!r}")
        if not _SERVICE.fullmatch(service):
            raise ValueError(
                f"a service name is letters, digits, '.', '_' and '-' (1 to 200), not"
                f" {service!r}, in {shown!r}"
            )
        if db_text and not (db_text.isascii() and db_text.isdigit()):
            raise ValueError(f"the db of a Redis URL is a number, not {db_text!r}")
        given = parse_qs(query, keep_blank_values=True)
        for name, values in given.items():
            if len(values) != 1:
                raise ValueError(f"URL option {name} given {len(values)} times in {shown!r}")
        sentinel_auth = {k: given.pop(k)[0] for k in _SENTINEL_OPTIONS if k in given}
        for name, value in sentinel_auth.items():
            if not value:
                raise ValueError(f"URL option {name} is empty in {shown!r}")
        tls = None
        if scheme == "rediss+sentinel":
            tls = parse_options(urlencode(given, doseq=True))
        elif given:
            unknown = sorted(set(given) - {"ssl_ca_certs", "ssl_certfile", "ssl_keyfile"})
            raise ValueError(
                f"unknown Redis URL option(s) {', '.join(unknown)} in {shown!r}"
                if unknown
                else f"URL options ssl_* are TLS options: they want rediss+sentinel://,"
                f" in {shown!r}"
            )
        creds = urlsplit(f"redis://{auth}@x" if auth else "redis://x")  # as redis:// reads them
        server = RedisURL(
            username=unquote(creds.username) if creds.username else None,
            password=unquote(creds.password) if creds.password else None,
            db=int(db_text) if db_text else 0,
            tls=tls,
        )
        sentinels = []
        for hostport in hosts.split(","):
            if not hostport:
                continue
            host, colon, port = hostport.rpartition(":")
            if not colon or (host.endswith("]") is False and ":" in host):
                host, port = hostport, "26379"  # the sentinels' usual port
            ok = port.isascii() and port.isdigit() and 0 < int(port) < 65536
            ok = ok and bool(_HOST.fullmatch(host))
            if not ok:
                raise ValueError(
                    f"a sentinel is HOST:PORT (a port 1 to 65535), not {hostport!r}, in {shown!r}"
                )
            sentinels.append(
                RedisURL(
                    host=host.strip("[]"),
                    port=int(port),
                    username=sentinel_auth.get("sentinel_username"),
                    password=sentinel_auth.get("sentinel_password"),
                    tls=tls,
                )
            )
        if not sentinels:
            raise ValueError(f"no sentinel in {shown!r}")
        return cls(tuple(sentinels), service, server)


class SentinelRedis(Commands):
    """The :class:`~shardsched.store.redis.connection.Redis` interface on whichever server
    the sentinels name primary (module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        size: int = 4,
        connect_timeout: float = 5.0,
        retry_for: float = 10.0,
        log_failures: bool = True,
    ) -> None:
        self.spec = SentinelURL.parse(url)
        self._size, self._timeout, self._retry_for = size, connect_timeout, retry_for
        self._log_failures = log_failures
        self._pool: Redis | None = None  #: on the primary we believe in; None: find it
        self._lock = trio.Lock()
        self._closed = False
        self._last_seen: tuple[str, int] | None = None
        self._durable: Durable | None = None
        self._tracked: weakref.WeakSet[Connection] = weakref.WeakSet()
        #: switches of primary seen so far (a test and the log count them)
        self.switches = 0

    @property
    def url(self) -> RedisURL:
        """The primary in use (or the first sentinel's address, before one is found)."""
        if self._pool is not None:
            return self._pool.url
        first = self.spec.sentinels[0]
        return replace(self.spec.server, host=first.host, port=first.port)

    def describe(self) -> str:
        where = "not found yet" if self._pool is None else f"{self.url.host}:{self.url.port}"
        return f"primary of {self.spec.service!r} via sentinel: {where}"

    async def primary(self) -> Redis:
        """The pool on the primary, finding it first when it is not known."""
        if self._closed:
            raise RedisConnectionError("client is closed")
        pool = self._pool
        if pool is not None:
            return pool
        async with self._lock:
            if self._pool is None:
                host, port = await self._discover()
                self._adopt(host, port)
            assert self._pool is not None
            return self._pool

    async def url_of_key(self, key: str) -> RedisURL:
        return (await self.primary()).url

    def set_durability(self, durable: Durable | None) -> None:
        self._durable = durable
        if self._pool is not None:
            self._pool.set_durability(durable)

    async def forget(self, pool: Redis | None = None) -> bool:
        """Find the primary again before the next call (unless another call already did:
        ``pool`` is the one that failed); the old pool's connections close, its
        subscriptions with them (they move to the new primary). Whether it forgot one."""
        if pool is None or pool is self._pool:
            old, self._pool = self._pool, None
            if old is not None:
                tracked, self._tracked = list(self._tracked), weakref.WeakSet()
                for conn in tracked:  # blocking pops on the old primary: they look again
                    await conn.abort()
                await old.aclose()
                return True
        return False

    def track(self, conn: Connection) -> None:
        self._tracked.add(conn)

    def _adopt(self, host: str, port: int) -> None:
        before, self._last_seen = self._last_seen, (host, port)
        self._pool = Redis(
            replace(self.spec.server, host=host, port=port),
            size=self._size,
            connect_timeout=self._timeout,
            retry_for=0.3,  # a dead primary: ask the sentinels again soon
            log_failures=False,
        )
        self._pool.set_durability(self._durable)
        if before is None:
            log.info("Redis primary of %r is %s:%d", self.spec.service, host, port)
        elif before != (host, port):
            self.switches += 1
            log.warning(
                "Redis primary of %r is now %s:%d (was %s:%d)",
                self.spec.service, host, port, *before,
            )  # fmt: skip

    async def _discover(self) -> tuple[str, int]:
        """Ask each sentinel in turn for the primary, until one names a server that says
        it is the primary, for up to ``retry_for`` seconds; raises RedisConnectError."""
        deadline = trio.current_time() + self._retry_for
        last = "no sentinel answered"
        said = False
        while True:
            for sentinel in self.spec.sentinels:
                try:
                    addr = await self._ask(sentinel)
                except RedisConnectionError as exc:
                    last = str(exc)
                    continue
                if addr is None:
                    last = (
                        f"sentinel {sentinel.host}:{sentinel.port} knows no {self.spec.service!r}"
                    )
                    continue
                try:
                    role = await self._role(*addr)
                except RedisConnectionError as exc:
                    last = f"the primary it names, {addr[0]}:{addr[1]}: {exc}"
                    continue
                if role == b"master":
                    return addr
                last = f"{addr[0]}:{addr[1]} is named primary but says it is a {role.decode()}"
            if trio.current_time() > deadline:
                raise RedisConnectError(f"no primary for {self.spec.service!r}: {last}")
            if not said and self._log_failures:
                said = True
                log.warning("looking for the Redis primary of %r: %s", self.spec.service, last)
            await trio.sleep(0.1)

    async def _ask(self, sentinel: RedisURL) -> tuple[str, int] | None:
        conn = await Connection.open(sentinel, min(self._timeout, 0.5), scripts=False)
        try:
            (reply,) = await conn.execute_many(
                [("SENTINEL", "get-master-addr-by-name", self.spec.service)]
            )
        finally:
            await conn.aclose()
        if isinstance(reply, hiredis.ReplyError):
            raise refusal(sentinel.host, sentinel.port, reply)
        if not reply:
            return None
        return bytes(reply[0]).decode(), int(reply[1])

    async def _role(self, host: str, port: int) -> bytes:
        url = replace(self.spec.server, host=host, port=port)
        conn = await Connection.open(url, min(self._timeout, 0.5), scripts=False)
        try:
            (reply,) = await conn.execute_many([("ROLE",)])
        finally:
            await conn.aclose()
        if isinstance(reply, hiredis.ReplyError):
            raise refusal(host, port, reply)
        return bytes(reply[0])

    async def replies(self, commands: Sequence[Command]) -> list[Any]:
        """Run commands on the primary in one round trip; a call that reached no server is
        sent to the primary found again, for up to ``retry_for`` seconds."""
        deadline = trio.current_time() + self._retry_for
        while True:
            pool = await self.primary()
            try:
                replies = await pool.replies(commands)
            except RedisConnectError:
                await self.forget(pool)  # nothing was sent: safe to send to the new one
                if trio.current_time() > deadline:
                    raise
                continue
            except RedisNotDurable:
                raise  # the primary answered: it is its replicas that lag
            except RedisConnectionError:
                await self.forget(pool)
                raise
            if any(
                isinstance(r, hiredis.ReplyError) and str(r).split(" ", 1)[0] in _NOT_PRIMARY
                for r in replies
            ):
                await self.forget(pool)
            return replies

    async def subscribe(self, *channels: str) -> AsyncIterator[bytes | None]:
        """Pub/sub on the primary; on the new one after a switch (``None`` first: messages
        may have been missed)."""
        while True:
            try:
                pool = await self.primary()
            except RedisConnectionError:
                await trio.sleep(0.2)
                continue
            async for message in pool.subscribe_once(*channels):
                yield message
            await self.forget(pool)
            await trio.sleep(0.05)

    async def follow(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen to every sentinel's ``+switch-master`` and find the primary again when
        ours moves; forever (cancel it to stop)."""
        async with trio.open_nursery() as nursery:
            for sentinel in self.spec.sentinels:
                nursery.start_soon(self._listen, sentinel)
            task_status.started()

    async def _listen(self, sentinel: RedisURL) -> None:
        while True:
            try:
                conn = await Connection.open(sentinel, min(self._timeout, 1.0), scripts=False)
            except RedisConnectionError:
                await trio.sleep(1.0)
                continue
            try:
                await conn.send(("SUBSCRIBE", "+switch-master"))
                await conn.read()
                while True:
                    msg = await conn.read()
                    if not (isinstance(msg, list) and len(msg) == 3 and msg[0] == b"message"):
                        continue
                    text = bytes(msg[2]).decode()
                    if text.split(" ")[0] == self.spec.service and await self.forget():
                        where = f"{sentinel.host}:{sentinel.port}"
                        log.info("sentinel %s says +switch-master %s", where, text)
            except RedisConnectionError:
                pass
            finally:
                await conn.aclose()
            await trio.sleep(0.5)

    async def aclose(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()
