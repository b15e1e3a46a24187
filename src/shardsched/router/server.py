"""The HTTP server: hypercorn's per-connection handler behind an accept loop of our own.

hypercorn's ``serve`` has no connection cap and lets an exception inside one connection
escape into the nursery that holds every connection, so one malformed request could end
the whole process (a half-close racing an error response raised ``BusyResourceError``
out of hypercorn's connection task). Here each connection is its own failure domain:
whatever goes wrong inside it ends that connection, logged once, never the server.

Deadlines belong to the side that waits (docs/deployment.md, "HTTP limits"):

- reading from a client that has no request in the app (a slow-loris header, a silent
  connection, a TLS handshake) is bounded by ``read_timeout_s``;
- while the app handles a request, the app bounds its own reads (a body stalled
  half-way is a 408, :mod:`.http`), and a long-lived answer (Server-Sent Events, a live
  output) is never cut by a read deadline: it ends when the client goes;
- a write to a client that does not read is bounded by ``write_timeout_s``.

A graceful stop (``stop`` set: a node or router on SIGTERM) drains: readiness answers 503
at once (``STOPPING_KEY``), no new connection is accepted, the requests in the app finish
within ``drain_s``, then idle keep-alive connections close. Only then does the caller stop
what the requests need (a node's shard actors, the Redis pool).
"""

from __future__ import annotations

import errno
import logging
import math
import ssl
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config

from shardsched.core.errors import ConfigError
from shardsched.router.in_flight import (
    CONNECTION_KEY,
    MAX_IN_FLIGHT,
    OPEN_IN_FLIGHT,
    OPEN_PER_CLIENT,
    InFlightLimit,
)
from shardsched.router.wire import http_1_1_only, json_protocol_errors

log = logging.getLogger(__name__)

#: HTTP limits (docs/deployment.md): a connection that sends nothing for READ_TIMEOUT_S
#: while no request of it is in the app (a slow-loris header, a TLS handshake) is closed;
#: an idle keep-alive connection is closed after KEEP_ALIVE_S; a client that reads nothing
#: of an answer for WRITE_TIMEOUT_S is closed; at most MAX_CONNECTIONS are open at once
#: (the next one is closed as soon as it is accepted) and at most MAX_IN_FLIGHT API requests
#: are handled at once (the next ones answered 503 at once; health and readiness exempt).
READ_TIMEOUT_S = 10
KEEP_ALIVE_S = 5.0
WRITE_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 1024
BACKLOG = 1024
#: How long a connection's requests may go on in the app once its client reset it or the
#: connection closed (a client that half-closed has the write timeout to read its answers):
#: in-flight slots are held by a connection's lifetime, never longer.
GONE_GRACE_S = 1.0
#: How long a graceful stop lets the requests in the app finish (a stream is cut then).
DRAIN_S = 10.0
#: The key of the server's stopping event (a trio.Event) in the ASGI scope's ``state``:
#: set once a graceful stop began, so readiness answers 503 while requests drain.
STOPPING_KEY = "shardsched.stopping"


class Connection:
    """One accepted connection as hypercorn sees it: gives its slot back the moment it is
    closed (hypercorn's task outlives the socket by up to the keep-alive timeout), puts the
    read deadline on reads while the app holds no request of it, bounds every write, and
    lets one send (or end of sending) at a time through."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        slots: trio.Semaphore,
        read_timeout_s: float,
        write_timeout_s: float,
    ) -> None:
        self._stream = stream
        self._slots: trio.Semaphore | None = slots
        self.read_timeout_s = read_timeout_s
        self._write_timeout_s = write_timeout_s
        self._send_lock = trio.Lock()
        self._read_scope: trio.CancelScope | None = None
        self._requests = 0  # requests of this connection inside the app
        #: The scope of everything hypercorn runs for this connection, its requests in the
        #: app included: its deadline is set once the client is gone (:meth:`_end_in`).
        self.lifetime = trio.CancelScope()

    def _end_in(self, seconds: float) -> None:
        """Cut whatever of this connection is still running ``seconds`` from now (an app
        that never looks for the client's disconnect must not hold its slot for ever)."""
        self.lifetime.deadline = min(self.lifetime.deadline, trio.current_time() + seconds)

    def enter(self) -> None:
        self._requests += 1
        if self._read_scope is not None:
            self._read_scope.deadline = math.inf

    def leave(self) -> None:
        self._requests -= 1
        if self._requests == 0 and self._read_scope is not None:
            self._read_scope.deadline = trio.current_time() + self.read_timeout_s

    def release(self) -> None:
        if self._slots is not None:
            self._slots.release()
            self._slots = None

    async def aclose(self) -> None:
        self.release()
        self._end_in(GONE_GRACE_S)  # nothing can be sent on it any more
        await self._stream.aclose()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        deadline = math.inf if self._requests else trio.current_time() + self.read_timeout_s
        with trio.CancelScope(deadline=deadline) as scope:
            self._read_scope = scope
            try:
                data = await self._stream.receive_some(max_bytes)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.release()
                self._end_in(GONE_GRACE_S)  # reset: no answer can reach the client
                raise
            finally:
                self._read_scope = None
        if scope.cancelled_caught:
            self.release()
            raise trio.TooSlowError  # hypercorn closes the connection
        if not data:  # the client has gone, or half-closed and waits for its answers
            self.release()
            self._end_in(self._write_timeout_s)
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        async with self._send_lock:
            with trio.move_on_after(self._write_timeout_s):
                await self._stream.send_all(data)
                return
        raise trio.BrokenResourceError("the client read nothing for the write timeout")

    async def send_eof(self) -> None:
        async with self._send_lock:
            with trio.move_on_after(self._write_timeout_s):
                await self._stream.send_eof()  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:  # socket, do_handshake, transport_stream, …
        return getattr(self._stream, name)


def read_timeout_s(scope: Any) -> float:
    """How long the app waits for the next bytes of a request's body: the read timeout of
    the connection it came on (READ_TIMEOUT_S when it came some other way)."""
    conn: Connection | None = scope.get("state", {}).get(CONNECTION_KEY)
    return READ_TIMEOUT_S if conn is None else conn.read_timeout_s


@dataclass(frozen=True)
class TlsFiles:
    """The API's HTTPS certificate (chain) and key, PEM files."""

    certfile: str
    keyfile: str


def split_bind(bind: str) -> tuple[str, int]:
    """HOST:PORT (``[::1]:80`` too) as (host, port); a ConfigError otherwise."""
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--http wants HOST:PORT, got {bind!r}")
    return host.strip("[]"), int(port)


class _Failures:
    """Connections that ended in an error: each logged once, as one line; past a few a
    second only counted (a flood of garbage must not become a flood of logs)."""

    def __init__(self, per_s: int = 5) -> None:
        self.total = 0
        self._per_s = per_s
        self._window = -math.inf
        self._in_window = 0
        self._muted = 0

    def record(self, group: BaseExceptionGroup[Exception], peer: str) -> None:
        self.total += 1
        now = trio.current_time()
        if now - self._window >= 1.0:
            if self._muted:
                log.warning("%d more HTTP connections ended in errors", self._muted)
            self._window, self._in_window, self._muted = now, 0, 0
        self._in_window += 1
        if self._in_window > self._per_s:
            self._muted += 1
            return
        leaves = _leaves(group)
        what = "; ".join(f"{type(e).__name__}: {e}" for e in leaves[:3])
        log.warning("HTTP connection from %s ended in an error: %s", peer, what)


def _leaves(group: BaseExceptionGroup[Exception]) -> list[Exception]:
    out: list[Exception] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        else:
            out.append(exc)
    return out


def _peer(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[0])
    except OSError:
        return "?"


async def serve_http(
    app: Any,
    bind: str,
    *,
    read_timeout_s: float = READ_TIMEOUT_S,
    keep_alive_s: float = KEEP_ALIVE_S,
    write_timeout_s: float = WRITE_TIMEOUT_S,
    max_in_flight: int = MAX_IN_FLIGHT,
    max_open_in_flight: int = OPEN_IN_FLIGHT,
    open_per_client: int = OPEN_PER_CLIENT,
    max_connections: int = MAX_CONNECTIONS,
    tls: TlsFiles | None = None,
    stop: trio.Event | None = None,
    drain_s: float = DRAIN_S,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` over HTTP/1.1 (or, with ``tls``, HTTPS; HTTP/2 is refused:
    :func:`.wire.http_1_1_only`) with hypercorn's connection handler. Each accepted
    connection takes a slot and one over ``max_connections`` is closed at once. Ready
    with the bound URLs; returns once ``stop`` is set and the server drained (module
    docstring); cancellation closes every connection at once."""
    # hypercorn's per-connection server (pinned to a release line in pyproject.toml)
    from hypercorn.trio.tcp_server import TCPServer
    from hypercorn.trio.worker_context import WorkerContext
    from hypercorn.typing import ConnectionState
    from hypercorn.utils import wrap_app

    json_protocol_errors()
    http_1_1_only()
    config = Config()
    config.alpn_protocols = ["http/1.1"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.read_timeout = None  # Connection's own deadline, lifted while the app holds a request
    config.keep_alive_timeout = keep_alive_s
    config.ssl_handshake_timeout = read_timeout_s
    context = None
    if tls is not None:
        config.certfile, config.keyfile = tls.certfile, tls.keyfile
        try:
            context = config.create_ssl_context()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--certfile/--keyfile: {exc}") from None
    limit = InFlightLimit(app, max_in_flight, max_open_in_flight, open_per_client)
    wrapped = wrap_app(limit, config.wsgi_max_body_size, "asgi")
    stopping = trio.Event()
    worker_context = WorkerContext(None)
    host, port = split_bind(bind)
    try:
        listeners = await trio.open_tcp_listeners(port, host=host, backlog=BACKLOG)
    except OSError as exc:  # one line naming the flag, not a traceback
        why = "the address is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise ConfigError(
            f"--http {bind}: {why} (another shardsched on it? choose another with --http)"
        ) from None
    binds = []
    for listener in listeners:
        name = listener.socket.getsockname()
        shown = f"[{name[0]}]" if ":" in name[0] else name[0]
        binds.append(f"{'https' if context else 'http'}://{shown}:{name[1]}")
    slots = trio.Semaphore(max_connections)
    refused = 0
    failures = _Failures()

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal refused
        try:
            slots.acquire_nowait()
        except trio.WouldBlock:  # over the cap: no slot, no queue
            refused += 1
            if refused == 1 or refused % 1000 == 0:
                log.warning("HTTP connection cap of %d reached: closing new ones", max_connections)
            await stream.aclose()
            return
        conn = Connection(
            stream if context is None else trio.SSLStream(stream, context, server_side=True),
            slots,
            read_timeout_s,
            write_timeout_s,
        )
        try:
            # hypercorn types its stream as trio.SocketStream; it only uses the Stream API,
            # which Connection forwards. Its scope's state carries the Connection.
            state = ConnectionState({CONNECTION_KEY: conn, STOPPING_KEY: stopping})
            with conn.lifetime:
                await TCPServer(wrapped, config, worker_context, state, conn)  # type: ignore[arg-type]
        except* Exception as group:  # this connection's failure, and nobody else's
            failures.record(group, _peer(stream))
        finally:
            conn.release()
            with trio.move_on_after(1, shield=True):
                await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as handlers:
        async with trio.open_nursery() as accepting:
            accepting.start_soon(
                partial(trio.serve_listeners, handle, listeners, handler_nursery=handlers)
            )
            task_status.started(binds)
            await (trio.sleep_forever() if stop is None else stop.wait())
            stopping.set()  # readiness says so from now on
            accepting.cancel_scope.cancel()
        for listener in listeners:
            await listener.aclose()  # a new connection is refused, not left in the backlog
        with trio.move_on_after(drain_s) as drain:
            await limit.idle()
        if drain.cancelled_caught:
            log.warning("HTTP: requests still in the app after %.0f s of draining: cut", drain_s)
        await worker_context.terminated.set()  # idle keep-alive connections close
        handlers.cancel_scope.deadline = trio.current_time() + 1.0
