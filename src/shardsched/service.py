"""The long-lived processes: node (shard actors + optional HTTP), router, worker.

Each is an ``async def`` that reports readiness through ``task_status`` and stops by
cancellation. Nesting is shutdown order: HTTP inside the shard actors inside the Redis
client, so HTTP drains first and leases are handed back last.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from shardsched import ops
from shardsched.errors import ConfigError
from shardsched.metrics import Metrics
from shardsched.redis import Redis, connect
from shardsched.router.app import create_app
from shardsched.shard.manager import ShardManager

log = logging.getLogger(__name__)


async def open_redis(
    url: str, namespace: str, shards: int | None, size: int = 8
) -> tuple[Redis, ops.Deployment]:
    redis = connect(url, size=size, retry_for=30.0)
    dep = await ops.drive_async(ops.open_deployment(namespace, shards), redis)
    return redis, dep


async def check_redis_config(redis: Redis, allow_eviction: bool) -> None:
    """Refuse an eviction policy: any of them can drop leases or ledger entries (DESIGN §2)."""
    _, policy = await redis.execute("CONFIG", "GET", "maxmemory-policy")
    if policy != b"noeviction":
        msg = f"Redis maxmemory-policy is {policy.decode()!r}; shardsched needs 'noeviction'"
        if not allow_eviction:
            raise ConfigError(msg + " (or pass --allow-eviction)")
        log.warning("%s; continuing because --allow-eviction was given", msg)


async def serve_http(
    app: Any, bind: str, *, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED
) -> None:
    config = Config()
    config.bind = [bind]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"  # the ready line is ours to print
    config.graceful_timeout = 2.0
    await serve(app, config, task_status=task_status)


async def run_node(
    redis: Redis,
    dep: ops.Deployment,
    *,
    http: str | None,
    node_id: str | None,
    lease_ttl_s: float = 5.0,
    renew_every_s: float = 1.5,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    manager = ShardManager(redis, dep, node_id, lease_ttl_s, renew_every_s, http=http)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run, name="shard-manager")
        binds: list[str] = []
        if http:
            app = create_app(redis, dep, manager.metrics)
            binds = await nursery.start(serve_http, app, http)
        task_status.started(binds)


async def run_router(
    redis: Redis,
    dep: ops.Deployment,
    *,
    http: str,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve_http(create_app(redis, dep), http, task_status=task_status)


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
                print(ready_line(value), flush=True)

    try:
        trio.run(runner)
    except* ConfigError as group:
        for exc in group.exceptions:
            print(f"shardsched: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
