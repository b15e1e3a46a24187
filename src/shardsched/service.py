"""The long-lived processes: node (shard actors + optional HTTP), router, worker.

Each is an ``async def`` that reports readiness through ``task_status`` and stops by
cancellation. Nesting is shutdown order: HTTP inside the shard actors inside the Redis
client, so HTTP drains first and leases are handed back last.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import trio

from shardsched import ops
from shardsched.core.errors import ConfigError, RedisUnavailable
from shardsched.core.pacing import Backoff
from shardsched.ops.retention import RetentionDefaults
from shardsched.router.app import create_app
from shardsched.router.guards import AccessPolicy
from shardsched.router.server import TlsFiles, serve_http, split_bind
from shardsched.runtime.heap import freeze_startup
from shardsched.runtime.metrics import Metrics
from shardsched.shard.manager import ShardManager
from shardsched.shard.retention import Retainer
from shardsched.store.archive import open_archive
from shardsched.store.drive import drive_async
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
            dep = await drive_async(ops.open_deployment(namespace, shards, archive), redis)
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
    host, _port = split_bind(bind)
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
