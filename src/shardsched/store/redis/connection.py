"""A small trio RESP client on hiredis: just what the service needs, nothing general.

redis-py has no trio client, so the node, router and worker speak RESP through this module
(ARCHITECTURE.md): ``hiredis.pack_command`` encodes, ``hiredis.Reader`` parses, calls are
pipelined, AUTH, SELECT and TLS (``rediss://``, :mod:`.tls`) come from the URL, and a lost
server is reconnected with
backoff. A connection whose call was cancelled or failed half-way is closed, never
reused, so no caller ever reads another caller's reply.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import hiredis
import trio

from shardsched.store.redis.durable import Command, Durable, writes
from shardsched.store.redis.errors import (
    RedisBusyError,
    RedisConnectError,
    RedisConnectionError,
    RedisNotDurable,
    RedisRefusedError,
    demoted,
    refusal,
    reply_error,
)
from shardsched.store.redis.tls import client_context
from shardsched.store.redis.url import RedisURL
from shardsched.store.scripts import fcall, load_functions, loaded_anyway, not_found

log = logging.getLogger(__name__)
__all__ = ["Command", "Commands", "Connection", "Durable", "Redis", "RedisURL"]


def _pack(command: Command) -> bytes:
    # hiredis's stub says Tuple[str | ...], a 1-tuple; it packs a tuple of any length.
    packed: bytes = hiredis.pack_command(tuple(command))  # type: ignore[arg-type]  # see above
    return packed


def _raise_errors(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            raise reply_error(reply)
    return replies


class Connection:
    """One RESP connection, used by one task at a time (the pool sees to that)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._reader = hiredis.Reader()
        self.broken = False

    @classmethod
    async def open(cls, url: RedisURL, timeout: float, scripts: bool = True) -> Connection:
        """Connect, authenticate, select the db and load every script (unless told not
        to); raises RedisError."""
        try:
            with trio.fail_after(timeout):
                stream: trio.abc.Stream = await trio.open_tcp_stream(url.host, url.port)
                if url.tls is not None:
                    try:
                        context = client_context(url.tls)
                    except ValueError as exc:
                        await stream.aclose()
                        raise RedisRefusedError(str(exc)) from None
                    tls = trio.SSLStream(stream, context, server_hostname=url.host)
                    try:
                        await tls.do_handshake()
                    except trio.BrokenResourceError as exc:
                        await stream.aclose()
                        raise RedisRefusedError(
                            f"TLS handshake with {url.host}:{url.port} failed: {exc.__cause__}"
                        ) from exc
                    stream = tls
                conn = cls(stream)
                hello: list[Command] = []
                if url.password is not None:
                    auth = ("AUTH", url.username, url.password) if url.username else None
                    hello.append(auth or ("AUTH", url.password))
                if url.db:
                    hello.append(("SELECT", url.db))
                loads = load_functions() if scripts else []
                try:
                    # Authenticated first: Redis drops an unauthenticated client that sends
                    # a bulk over 16 KiB, and a script with its helpers can be that big.
                    # Then a plain PING: protected mode and a missing password are
                    # answered to it, before we send anything big.
                    for batch in (hello, [("PING",)], loads):
                        if not batch:
                            continue
                        for reply in await conn.execute_many(batch):
                            if isinstance(reply, hiredis.ReplyError):
                                if "LOADING" in str(reply):  # restarting: retried as usual
                                    raise RedisConnectError(f"Redis is loading: {reply}")
                                if batch is loads and loaded_anyway(reply):
                                    continue
                                if batch is loads and str(reply).startswith("NOPERM"):
                                    break  # a user that loads nothing (a worker, a reader)
                                raise refusal(url.host, url.port, reply)
                except BaseException:
                    await conn.aclose()
                    raise
                return conn
        except RedisConnectionError as exc:
            if isinstance(exc, RedisConnectError):
                raise
            # lost during the handshake: a TLS port spoken to in plain text looks like this,
            # and so does a TLS server that wants a client certificate we did not send
            hint = (
                "if the server wants a client certificate, give ssl_certfile and ssl_keyfile"
                if url.tls is not None
                else "if the server speaks TLS, it needs a rediss:// URL"
            )
            raise RedisConnectError(
                f"connection to {url.host}:{url.port} lost during the handshake ({exc}); {hint}"
            ) from exc
        except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
            raise RedisConnectError(f"cannot connect to {url.host}:{url.port}: {exc}") from exc

    async def execute_many(self, commands: Sequence[Command]) -> list[Any]:
        """Send every command in one write, read every reply; error replies are returned
        as ``hiredis.ReplyError`` values in place, not raised."""
        if self.broken:
            raise RedisConnectionError("connection is closed")
        self.broken = True  # until every reply is read: cancellation leaves it unusable
        try:
            await self._stream.send_all(b"".join(_pack(c) for c in commands))
            replies = [await self._read_reply() for _ in commands]
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise RedisConnectionError(f"connection lost: {exc}") from exc
        self.broken = False
        return replies

    async def _read_reply(self) -> Any:
        reply = self._reader.gets()
        while reply is False:
            data = await self._stream.receive_some(65536)
            if not data:
                raise RedisConnectionError("server closed the connection")
            self._reader.feed(bytes(data))  # an SSLStream may hand a bytearray
            reply = self._reader.gets()
        return reply

    async def send(self, command: Command) -> None:
        """Write one command without reading its reply (pub/sub mode)."""
        try:
            await self._stream.send_all(_pack(command))
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.broken = True
            raise RedisConnectionError(f"connection lost: {exc}") from exc

    async def read(self) -> Any:
        """Read the next reply or pushed message (pub/sub mode)."""
        try:
            return await self._read_reply()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.broken = True
            raise RedisConnectionError(f"connection lost: {exc}") from exc

    async def aclose(self) -> None:
        self.broken = True
        with trio.move_on_after(1, shield=True):
            await self._stream.aclose()

    async def abort(self) -> None:
        """Close the socket under the stream, without a TLS goodbye: for a connection
        another task is reading (its read then fails as a lost connection)."""
        self.broken = True
        stream = self._stream
        raw = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
        with trio.move_on_after(1, shield=True):
            await raw.aclose()


class Commands:
    """What the service calls, over one ``replies`` (one server's, or a cluster's routed
    one): pipelines, single commands, our Lua scripts, the server's clock."""

    #: Whether a pipeline's commands run in the order given (one server: yes; a cluster
    #: runs each node's share apart, in parallel).
    in_order = True

    async def replies(self, commands: Sequence[Command]) -> list[Any]:
        """Run commands in one round trip; error replies in place as values, for the
        store's readers that act on them (``store/drive``)."""
        raise NotImplementedError

    async def pipeline(self, commands: Sequence[Command]) -> list[Any]:
        """Run commands in one round trip; the first error reply raises (RedisBusyError
        when it passes: BUSY, LOADING, OOM...), so no caller takes one for data."""
        return _raise_errors(await self.replies(commands))

    async def execute(self, *command: str | bytes | int | float) -> Any:
        """Run one command; raises ReplyError on an error reply."""
        return (await self.pipeline([command]))[0]

    async def scripts(
        self,
        calls: Sequence[tuple[str, Sequence[str], Sequence[Any]]],
        then: Sequence[Command] = (),
    ) -> list[Any]:
        """Run our Lua scripts (FCALL), then the commands ``then``, in one round trip;
        error replies as values. One the server lacks is loaded and called again."""
        commands: list[Command] = [fcall(name, keys, args) for name, keys, args in calls]
        replies = await self.replies([*commands, *then])
        if missing := not_found(replies[: len(calls)]):
            keys = calls[missing[0]][1]
            await self.load_functions(keys[0] if keys else None)
            again = await self.replies([commands[i] for i in missing])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return replies

    async def load_functions(self, key: str | None) -> None:
        """Every library on the server that holds ``key`` (a worker may load none)."""
        for reply in await self.replies(load_functions()):
            loaded = not isinstance(reply, hiredis.ReplyError) or loaded_anyway(reply)
            if not loaded and not str(reply).startswith("NOPERM"):
                raise reply_error(reply)

    async def script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run one Lua script; raises ReplyError on an error reply."""
        return _raise_errors(await self.scripts([(name, keys, args)]))[0]

    async def time_ms(self) -> int:
        """The Redis server's clock, in ms: the one clock."""
        sec, usec = await self.execute("TIME")
        return int(sec) * 1000 + int(usec) // 1000

    async def url_of_key(self, key: str) -> RedisURL:
        """The server that holds ``key`` now (a connection of one's own goes there)."""
        raise NotImplementedError

    def describe(self) -> str:
        """Which Redis this client uses, for ``/readyz`` and the log."""
        raise NotImplementedError

    def set_durability(self, durable: Durable | None) -> None:
        """Turn the durable mode on (or off, None) for every call from now on."""
        raise NotImplementedError

    def track(self, conn: Connection) -> None:
        """A connection of its own a caller opened where :meth:`url_of_key` said (a
        blocking pop): a client that moves to another server cuts it off then."""


class Redis(Commands):
    """A bounded pool of :class:`Connection` with reconnect-and-backoff.

    A call that loses its connection raises :class:`RedisConnectionError` (the command may
    or may not have run: callers' scripts are idempotent or say otherwise); the next call
    reconnects, retrying with exponential backoff for up to ``retry_for`` seconds.
    """

    def __init__(
        self,
        url: str | RedisURL,
        *,
        size: int = 4,
        connect_timeout: float = 5.0,
        retry_for: float = 10.0,
        log_failures: bool = True,
    ) -> None:
        self.url = url if isinstance(url, RedisURL) else RedisURL.parse(url)
        self._log_failures = log_failures  #: False while waiting for a server we started
        self._limit = trio.Semaphore(size)
        self._idle: list[Connection] = []
        self._subscribed: set[Connection] = set()  #: closed with the pool
        self._busy: set[Connection] = set()  #: in a call: cut off when the pool closes
        self._connect_timeout = connect_timeout
        self._retry_for = retry_for
        self._closed = False
        self.durability: Durable | None = None  #: set_durability

    async def _connect(self) -> Connection:
        deadline = trio.current_time() + self._retry_for
        delay = 0.05
        said = False
        while True:
            try:
                return await Connection.open(self.url, self._connect_timeout)
            except RedisConnectionError as exc:
                if not said and self._log_failures:  # once per episode: loud for an operator
                    said = True
                    level = logging.ERROR if isinstance(exc, RedisRefusedError) else logging.WARNING
                    log.log(level, "%s; retrying", exc)
                if trio.current_time() + delay > deadline:
                    raise
            await trio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def set_durability(self, durable: Durable | None) -> None:
        self.durability = durable

    async def replies(self, commands: Sequence[Command]) -> list[Any]:
        """Run commands in one round trip; error replies come back in place as values.
        In the durable mode a round trip that may write ends with ``PUBLISH`` and
        ``WAIT`` (every write the primary made before it on the replicas), and too few
        replicas raise RedisNotDurable: the commands ran, but a failover may lose what
        they wrote."""
        if self._closed:
            raise RedisConnectionError("client is closed")
        durable = self.durability
        if durable is not None and writes(commands):
            commands = [*commands, *durable.commands]
        else:
            durable = None
        async with self._limit:
            conn = self._idle.pop() if self._idle else await self._connect()
            self._busy.add(conn)
            try:
                replies = await conn.execute_many(commands)
                if any(isinstance(r, hiredis.ReplyError) and demoted(r) for r in replies):
                    # A demoted primary: behind a name that moves (a managed endpoint),
                    # connecting again resolves the name again and finds the new one.
                    conn.broken = True
                    idle, self._idle = self._idle, []
                    for other in idle:
                        await other.aclose()
            finally:
                self._busy.discard(conn)
                if conn.broken or self._closed:
                    await conn.aclose()
                else:
                    self._idle.append(conn)
        if durable is not None:
            acked = replies[-1]
            del replies[-2:]
            if isinstance(acked, hiredis.ReplyError):  # a replica: its READONLY replies say so
                if not any(isinstance(r, hiredis.ReplyError) for r in replies):
                    raise RedisBusyError(f"READONLY {acked}")
                return replies
            if not isinstance(acked, int) or acked < durable.replicas:
                raise RedisNotDurable(
                    f"{acked} of {durable.replicas} replicas acknowledged within"
                    f" {durable.timeout_ms} ms: what this call wrote may be lost in a failover"
                )
        return replies

    async def subscribe(self, *channels: str) -> AsyncIterator[bytes | None]:
        """Yield pub/sub message payloads forever; ``None`` after every (re)subscription,
        meaning "messages may have been missed: look at everything once"."""
        delay = 0.05
        while True:
            delivered = False
            async for message in self.subscribe_once(*channels):
                delivered = True
                delay = 0.05
                yield message
            if not delivered:
                await trio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def subscribe_once(self, *channels: str) -> AsyncIterator[bytes | None]:
        """One subscription: ``None`` once subscribed, then payloads, until the connection
        is lost (then it returns)."""
        try:
            conn = await self._connect()
        except RedisConnectionError:
            return
        self._subscribed.add(conn)
        try:
            await conn.send(("SUBSCRIBE", *channels))
            for _ in channels:
                await conn.read()
            yield None
            while True:
                msg = await conn.read()
                if isinstance(msg, list) and len(msg) == 3 and msg[0] == b"message":
                    yield msg[2]
        except RedisConnectionError:
            return
        finally:
            self._subscribed.discard(conn)
            await conn.aclose()

    async def url_of_key(self, key: str) -> RedisURL:
        """The server that holds ``key``: this one."""
        return self.url

    def describe(self) -> str:
        return f"{self.url.host}:{self.url.port}"

    async def aclose(self) -> None:
        """Close every idle connection; cut off every subscription and every call in
        flight (they fail as a lost connection: a primary given up on, stopped or cut
        off, must not hold its callers until it answers)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()
        for conn in [*self._subscribed, *self._busy]:
            await conn.abort()
