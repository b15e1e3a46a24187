"""The long-lived processes: node (shard actors + optional HTTP), router, worker.

Each is an ``async def`` that reports readiness through ``task_status`` and stops by
cancellation. Nesting is shutdown order: HTTP inside the shard actors inside the Redis
client, so HTTP drains first and leases are handed back last.
"""

from __future__ import annotations

import logging
import re
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config

from shardsched import ops
from shardsched.core.errors import ConfigError, RedisUnavailable
from shardsched.core.pacing import Backoff
from shardsched.ops.retention import RetentionDefaults
from shardsched.router.app import create_app
from shardsched.router.guards import AccessPolicy
from shardsched.runtime.heap import freeze_startup
from shardsched.runtime.metrics import Metrics
from shardsched.shard.manager import ShardManager
from shardsched.shard.retention import Retainer
from shardsched.store.archive import open_archive
from shardsched.store.redis import Redis, RedisError, ReplyError, connect

log = logging.getLogger(__name__)


async def open_redis(
    url: str,
    namespace: str,
    shards: int | None,
    size: int = 8,
    wait: bool = True,
    archive: str | None = None,
) -> tuple[Redis, ops.Deployment]:
    """Connect and read (or set up) the deployment. Until Redis can be used, say why as an
    error, with what to do, and try again (capped backoff), unless ``wait`` is False: a
    long-lived process started before its Redis, or against a misconfigured one, waits
    loudly instead of dying or hanging silent."""
    redis = connect(url, size=size, retry_for=30.0 if wait else 5.0)
    backoff = Backoff(first=1.0, cap=10.0)
    while True:
        try:
            dep = await ops.drive_async(ops.open_deployment(namespace, shards, archive), redis)
            return redis, dep
        except (RedisError, RedisUnavailable) as exc:
            if not wait:
                await redis.aclose()
                raise
            pause = backoff.next()
            log.error("cannot use Redis at %s: %s; retrying in %.0f s", _safe(url), exc, pause)
            await trio.sleep(pause)


def _safe(url: str) -> str:
    """The URL without its password, for logs."""
    return re.sub(r"(//[^:/@]*:)[^@]*@", r"\1***@", url)


async def check_redis_config(redis: Redis, allow_eviction: bool) -> None:
    """Refuse an eviction policy: any of them can drop leases or ledger entries (see the
    README, "Deployments and their durability").
    A Redis user without CONFIG (the node's ACL role has none) cannot look: say so, and go
    on; the operator who made the user answers for the policy."""
    try:
        _, policy = await redis.execute("CONFIG", "GET", "maxmemory-policy")
    except ReplyError as exc:
        if not str(exc).startswith("NOPERM"):
            raise
        log.warning(
            "cannot check Redis maxmemory-policy (this user may not run CONFIG): it must be "
            "noeviction, or a full Redis may evict leases and ledger entries"
        )
        return
    if policy != b"noeviction":
        msg = f"Redis maxmemory-policy is {policy.decode()!r}; shardsched needs 'noeviction'"
        if not allow_eviction:
            raise ConfigError(msg + " (or pass --allow-eviction)")
        log.warning("%s; continuing because --allow-eviction was given", msg)


#: HTTP limits (README, "HTTP limits"): a connection that sends nothing for READ_TIMEOUT_S
#: while a request is open (a body stalled half-way, a slow-loris header) is closed; an
#: idle keep-alive connection is closed after KEEP_ALIVE_S; at most MAX_CONNECTIONS are
#: open at once (the next one is closed as soon as it is accepted) and at most
#: MAX_IN_FLIGHT requests are handled at once (the next ones answered 503 at once).
READ_TIMEOUT_S = 10
KEEP_ALIVE_S = 5.0
MAX_CONNECTIONS = 1024
MAX_IN_FLIGHT = 256
BACKLOG = 1024


class InFlightLimit:
    """ASGI middleware: at most ``limit`` HTTP requests in the app at once; beyond, a 503 in
    the API's error shape, without reading the request (load sheds before it queues)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            body = (
                b'{"error":{"code":"overloaded","message":"too many requests in flight",'
                b'"details":{"limit":%d}}}' % self.limit
            )
            headers = [
                (b"content-type", b"application/json"),
                (b"retry-after", b"1"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


class _SlotStream:
    """A connection's stream that gives its slot back the moment it is closed: hypercorn's
    connection task outlives the socket by up to the keep-alive timeout, and a closed
    connection must not count against the cap."""

    def __init__(self, stream: trio.abc.Stream, slots: trio.Semaphore) -> None:
        self._stream = stream
        self._slots: trio.Semaphore | None = slots

    def release(self) -> None:
        if self._slots is not None:
            self._slots.release()
            self._slots = None

    async def aclose(self) -> None:
        self.release()
        await self._stream.aclose()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        try:
            data = await self._stream.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.release()
            raise
        if not data:  # the client has gone
            self.release()
        return data

    def __getattr__(self, name: str) -> Any:  # send_all, receive_some, socket, …
        return getattr(self._stream, name)


@dataclass(frozen=True)
class TlsFiles:
    """The API's HTTPS certificate (chain) and key, PEM files."""

    certfile: str
    keyfile: str


def _split_bind(bind: str) -> tuple[str, int]:
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--http wants HOST:PORT, got {bind!r}")
    return host.strip("[]"), int(port)


async def serve_http(
    app: Any,
    bind: str,
    *,
    read_timeout_s: int = READ_TIMEOUT_S,
    keep_alive_s: float = KEEP_ALIVE_S,
    max_in_flight: int = MAX_IN_FLIGHT,
    max_connections: int = MAX_CONNECTIONS,
    tls: TlsFiles | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` over HTTP/1.1 and h2c (or, with ``tls``, HTTPS with h2 by ALPN) with
    hypercorn's connection handler, behind our
    own accept loop: hypercorn's ``serve`` has no connection cap, so each accepted
    connection takes a slot and one over ``max_connections`` is closed at once. Ready with
    the bound URLs; cancellation closes every connection."""
    # hypercorn's per-connection server (pinned to a release line in pyproject.toml)
    from hypercorn.trio.tcp_server import TCPServer
    from hypercorn.trio.worker_context import WorkerContext
    from hypercorn.typing import ConnectionState
    from hypercorn.utils import wrap_app

    config = Config()
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.read_timeout = read_timeout_s
    config.keep_alive_timeout = keep_alive_s
    context = None
    if tls is not None:
        config.certfile, config.keyfile = tls.certfile, tls.keyfile
        try:
            context = config.create_ssl_context()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--certfile/--keyfile: {exc}") from None
    wrapped = wrap_app(InFlightLimit(app, max_in_flight), config.wsgi_max_body_size, "asgi")
    worker_context = WorkerContext(None)
    host, port = _split_bind(bind)
    listeners = await trio.open_tcp_listeners(port, host=host, backlog=BACKLOG)
    binds = []
    for listener in listeners:
        name = listener.socket.getsockname()
        shown = f"[{name[0]}]" if ":" in name[0] else name[0]
        binds.append(f"{'https' if context else 'http'}://{shown}:{name[1]}")
    slots = trio.Semaphore(max_connections)
    refused = 0

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
        held = _SlotStream(
            stream if context is None else trio.SSLStream(stream, context, server_side=True),
            slots,
        )
        try:
            # hypercorn types its stream as trio.SocketStream; it only uses the Stream API,
            # which _SlotStream forwards.
            await TCPServer(wrapped, config, worker_context, ConnectionState({}), held)  # type: ignore[arg-type]
        finally:
            held.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            partial(trio.serve_listeners, handle, listeners, handler_nursery=nursery)
        )
        task_status.started(binds)


async def run_node(
    redis: Redis,
    dep: ops.Deployment,
    *,
    http: str | None,
    node_id: str | None,
    lease_ttl_s: float = 5.0,
    renew_every_s: float = 2.0,
    policy: AccessPolicy | None = None,
    tls: TlsFiles | None = None,
    retention: RetentionDefaults | None = None,
    archive: str | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The shard manager, the HTTP API unless ``http`` is None, and, with ``retention``
    and ``archive``, the task moving old history to the archive."""
    if http:
        policy = policy or access_policy(http)  # refuses a bad --http before any lease
    manager = ShardManager(redis, dep, node_id, lease_ttl_s, renew_every_s, http=http)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run, name="shard-manager")
        if retention is not None and archive:
            retainer = Retainer(
                redis, dep, open_archive(archive), retention, manager.leases, manager.metrics
            )
            await nursery.start(retainer.run, name="retention")
        binds: list[str] = []
        if http:
            app = create_app(redis, dep, manager.metrics, policy)
            binds = await nursery.start(partial(serve_http, app, http, tls=tls))
        task_status.started(binds)


async def run_router(
    redis: Redis,
    dep: ops.Deployment,
    *,
    http: str,
    policy: AccessPolicy | None = None,
    tls: TlsFiles | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    app = create_app(redis, dep, policy=policy or access_policy(http))
    await serve_http(app, http, tls=tls, task_status=task_status)


def access_policy(
    bind: str,
    *,
    insecure_no_auth: bool = False,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    metrics_auth: bool = False,
) -> AccessPolicy:
    """The access policy of an API bound to ``bind`` (HOST:PORT); a ConfigError for
    ``--insecure-no-auth`` off loopback."""
    host, _port = _split_bind(bind)
    return AccessPolicy.for_bind(
        host,
        insecure_no_auth=insecure_no_auth,
        allowed_hosts=tuple(allow_hosts),
        allowed_origins=tuple(allow_origins),
        metrics_auth=metrics_auth,
    )


def metrics_app(metrics: Metrics) -> Any:
    """A bare /metrics endpoint (a worker's ``--metrics HOST:PORT``)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def endpoint(request: Request) -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return Starlette(routes=[Route("/metrics", endpoint, methods=["GET"])])


def run_until_signal(
    main: Callable[..., Awaitable[Any]],
    ready_line: Callable[[Any], str],
    graceful: Callable[[], None] | None = None,
) -> None:
    """Run ``main`` (a ``task_status`` task) until SIGINT/SIGTERM, printing a line once ready.

    With ``graceful``, the first signal calls it and ``main`` is expected to return by
    itself (a worker draining); a second signal stops everything at once.
    """

    async def runner() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    first = True
                    async for _ in signals:
                        if graceful is not None and first:
                            first = False
                            graceful()
                        else:
                            nursery.cancel_scope.cancel()

                async def run_main(*, task_status: trio.TaskStatus[Any]) -> None:
                    await main(task_status=task_status)
                    nursery.cancel_scope.cancel()  # it returned by itself: we are done

                nursery.start_soon(watch)
                value = await nursery.start(run_main)
                freeze_startup()
                print(ready_line(value), flush=True)

    try:
        trio.run(runner)
    except* ConfigError as group:
        for exc in group.exceptions:
            print(f"shardsched: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
