"""The long-lived processes: node (shard actors + optional HTTP), router, worker.

``run_node``, ``run_router`` and ``run_worker`` are ``async def``s that report readiness
through ``task_status``; ``serve_node``, ``serve_router`` and ``serve_worker`` run one as
a process until a signal (the CLI only turns its flags into their options). Nesting is
shutdown order. On SIGTERM a node's HTTP server drains first (readiness answers 503, no
new connection, the requests in the app finish within ``router/server.DRAIN_S``), then
its shard actors stop and hand their leases back, then the Redis pool closes. A worker
drains its runs (``--drain-grace``). A second signal stops everything at once.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from shardsched import ops
from shardsched.core.apps import App, load_app
from shardsched.core.errors import RedisUnavailable
from shardsched.core.pacing import Backoff
from shardsched.core.queues import DEFAULT_QUEUE
from shardsched.router.app import create_app
from shardsched.router.guards import AccessPolicy
from shardsched.router.login_links import LoginLinks
from shardsched.router.server import TlsFiles, serve_http, split_bind
from shardsched.runtime.app_deploys import deploy_app_at_start
from shardsched.runtime.lifetime import run_until_signal
from shardsched.runtime.metrics import Metrics
from shardsched.runtime.tracing import RunTracer, tracer_from_env
from shardsched.shard.manager import ShardManager
from shardsched.shard.retention import Retainer
from shardsched.store.deployment import Durability
from shardsched.store.drive import drive_async
from shardsched.store.durable_watch import follow_durability
from shardsched.store.lua.runs import OutputQuota
from shardsched.store.redis import Redis, RedisError, connect, follow_primary, use_durability
from shardsched.store.redis_config import check_redis_config, say_durability
from shardsched.store.retention import RetentionDefaults
from shardsched.worker.sandbox import CommandPolicy, Sandbox
from shardsched.worker.worker import Worker

log = logging.getLogger(__name__)


async def open_redis(
    url: str,
    namespace: str,
    shards: int | None,
    size: int = 8,
    wait: bool = True,
    archive: str | None = None,
    durable: Durability | None = None,
) -> tuple[Redis, ops.Deployment]:
    """Connect and read (or set up) the deployment. Until Redis can be used, say why as an
    error, with what to do, and try again (capped backoff), unless ``wait`` is False: a
    long-lived process started before its Redis, or against a misconfigured one, waits
    loudly instead of dying or hanging silent."""
    redis = connect(url, size=size, retry_for=30.0 if wait else 5.0)
    backoff = Backoff(first=1.0, cap=10.0)
    while True:
        try:
            dep = await drive_async(ops.open_deployment(namespace, shards, archive, durable), redis)
            use_durability(redis, dep)
            if dep.durable is not None:
                await say_durability(redis, dep.durable)
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
    stop: trio.Event | None = None,
    tracer: RunTracer | None = None,
    login_links: LoginLinks | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The shard manager, the HTTP API unless ``http`` is None (``login_links``: its
    console's one-time login codes, which ``dev`` issues), and, with ``retention``
    and ``archive``, the task moving old history to the archive. Once ``stop`` is set the
    HTTP API drains, then the shard actors stop and hand their leases back, and this
    returns; cancellation stops everything at once."""
    if http:
        policy = policy or access_policy(http)  # refuses a bad --http before any lease
    manager = ShardManager(
        redis,
        dep,
        node_id,
        lease_ttl_s,
        renew_every_s,
        http=http,
        tracer=tracer,
        auto_resume=ops.resume_if_due,
    )
    async with trio.open_nursery() as actors:
        await actors.start(follow_primary, redis)
        await actors.start(follow_durability, redis, dep)
        await actors.start(manager.run, name="shard-manager")
        if retention is not None and archive:
            from shardsched.store.archive import open_archive  # pyarrow: only when archiving

            retainer = Retainer(
                redis, dep, open_archive(archive), retention, manager.leases, manager.metrics
            )
            await actors.start(retainer.run, name="retention")
        if http:
            app = create_app(redis, dep, manager.metrics, policy, login_links)
            async with trio.open_nursery() as web:  # returns once drained (or never)
                serve = partial(serve_http, app, http, tls=tls, stop=stop)
                task_status.started(await web.start(serve))
        else:
            task_status.started([])
            await (trio.sleep_forever() if stop is None else stop.wait())
        actors.cancel_scope.cancel()  # the actors stop, and hand their leases back


async def run_router(
    redis: Redis,
    dep: ops.Deployment,
    *,
    http: str,
    policy: AccessPolicy | None = None,
    tls: TlsFiles | None = None,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The HTTP API alone; returns once ``stop`` is set and it drained."""
    app = create_app(redis, dep, policy=policy or access_policy(http))
    async with trio.open_nursery() as nursery:
        await nursery.start(follow_primary, redis)
        await nursery.start(follow_durability, redis, dep)
        await serve_http(app, http, tls=tls, stop=stop, task_status=task_status)
        nursery.cancel_scope.cancel()


async def run_worker(
    worker: Worker,
    metrics_bind: str | None = None,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A worker, and its ``/metrics`` at ``metrics_bind`` while it runs; returns once it
    drained (:meth:`Worker.drain`)."""
    async with trio.open_nursery() as nursery:
        await nursery.start(follow_primary, worker.redis)
        await nursery.start(follow_durability, worker.redis, worker.dep)
        if metrics_bind is None:
            await worker.run(task_status=task_status)
            nursery.cancel_scope.cancel()
            return
        binds = await nursery.start(serve_http, metrics_app(worker.metrics), metrics_bind)

        async def work(*, task_status: trio.TaskStatus[None]) -> None:
            await worker.run(task_status=task_status)
            nursery.cancel_scope.cancel()  # drained: stop serving metrics too

        await nursery.start(work)
        task_status.started(binds)


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


@dataclass(frozen=True)
class HttpOptions:
    """An API's bind and who may call it (``--http`` and the access flags)."""

    bind: str
    insecure_no_auth: bool = False
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    metrics_auth: bool = False
    tls: TlsFiles | None = None

    def policy(self) -> AccessPolicy:
        return access_policy(
            self.bind,
            insecure_no_auth=self.insecure_no_auth,
            allow_hosts=self.allow_hosts,
            allow_origins=self.allow_origins,
            metrics_auth=self.metrics_auth,
        )


@dataclass(frozen=True)
class NodeOptions:
    redis: str
    namespace: str
    shards: int | None = None
    http: HttpOptions | None = None
    node_id: str | None = None
    lease_ttl_s: float = 5.0
    renew_every_s: float = 2.0
    allow_eviction: bool = False
    retention: RetentionDefaults | None = None
    archive: str | None = None
    durable: Durability | None = None  #: sets the deployment's durable mode (None: keeps it)


def serve_node(o: NodeOptions) -> None:
    """A node process, until a signal (module docstring: the order it stops in)."""
    stop = trio.Event()
    tracer = tracer_from_env("shardsched-node")  # a bad setting: one line, before trio

    async def node(task_status: trio.TaskStatus[list[str]]) -> None:
        policy = None if o.http is None else o.http.policy()  # refused before any wait
        redis, dep = await open_redis(
            o.redis, o.namespace, o.shards, archive=o.archive, durable=o.durable
        )
        try:
            await check_redis_config(redis, o.allow_eviction)
            await run_node(
                redis,
                dep,
                http=None if o.http is None else o.http.bind,
                node_id=o.node_id,
                lease_ttl_s=o.lease_ttl_s,
                renew_every_s=o.renew_every_s,
                policy=policy,
                tls=None if o.http is None else o.http.tls,
                retention=o.retention,
                archive=o.archive,
                stop=stop,
                tracer=tracer,
                task_status=task_status,
            )
        finally:
            if tracer is not None:
                tracer.shutdown()  # what the batch processor still holds goes out
            with trio.CancelScope(shield=True):
                await redis.aclose()  # last: the leases were handed back through it

    run_until_signal(node, lambda binds: f"node ready {' '.join(binds)}".strip(), stop.set)


def serve_router(redis_url: str, namespace: str, http: HttpOptions) -> None:
    """A router process (the API alone), until a signal; drains like a node's API."""
    stop = trio.Event()

    async def router(task_status: trio.TaskStatus[list[str]]) -> None:
        policy = http.policy()
        redis, dep = await open_redis(redis_url, namespace, None)
        try:
            await run_router(
                redis, dep, http=http.bind, policy=policy, tls=http.tls, stop=stop,
                task_status=task_status,
            )  # fmt: skip
        finally:
            with trio.CancelScope(shield=True):
                await redis.aclose()

    run_until_signal(router, lambda binds: f"router ready {' '.join(binds)}", stop.set)


@dataclass(frozen=True)
class WorkerOptions:
    redis: str
    namespace: str
    worker_id: str | None = None
    concurrency: int = 16
    drain_grace_s: float = 10.0
    pass_env: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()  #: modules whose @handler functions register
    #: MODULE:APP of each shardsched.App to deploy at start (opt-in), its handlers served
    deploys: tuple[str, ...] = ()
    sandbox: Sandbox | None = None
    policy: CommandPolicy | None = None
    #: bytes: a run's tail kept, a job's output in Redis, all output in Redis (0: none)
    output_sizes: tuple[int, int, int] = (64 * 1024, 0, 0)
    metrics: str | None = None  #: HOST:PORT of its /metrics
    queues: tuple[str, ...] = (DEFAULT_QUEUE,)  #: it claims only these, in this order


async def deploy_at_start(o: WorkerOptions, apps: list[App]) -> None:
    """Deploy each app as ``shardsched deploy`` would, before the worker claims anything.
    A later deploy of an app (another worker starting, a ``shardsched deploy``) wins and
    this one stops quietly; a declaration the service refuses stops the worker, as a bad
    ``--import`` does."""
    redis, dep = await open_redis(o.redis, o.namespace, None)
    try:
        for app in apps:
            await deploy_app_at_start(redis, dep, app)
    finally:
        with trio.CancelScope(shield=True):
            await redis.aclose()


def serve_worker(o: WorkerOptions) -> None:
    """A worker process, until it drained after a signal."""
    for module in o.imports:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise SystemExit(f"shardsched: --import {module}: {exc!r}") from None
    try:
        apps = [load_app(spec) for spec in o.deploys]  # their handlers register
    except ValueError as exc:
        raise SystemExit(f"shardsched: --deploy {exc}") from None
    for app in apps:
        if not app.jobs() and not app.dags():  # it would prune all it had
            raise SystemExit(f"shardsched: --deploy: app {app.name!r} declares no job or DAG")
    if apps:
        trio.run(deploy_at_start, o, apps)  # before the worker claims anything
    holder, tracer = list[Worker](), tracer_from_env("shardsched-worker")

    async def worker(task_status: trio.TaskStatus[list[str]]) -> None:
        redis, dep = await open_redis(o.redis, o.namespace, None)
        tail, per_job, total = o.output_sizes
        w = Worker(
            redis,
            dep,
            o.worker_id,
            o.concurrency,
            drain_grace_s=o.drain_grace_s,
            pass_env=list(o.pass_env),
            sandbox=o.sandbox,
            policy=o.policy,
            output_quota=OutputQuota.of(per_job, total, dep.n_shards, tail),
            queues=o.queues,
            tracer=tracer,
        )
        holder.append(w)
        try:
            await run_worker(w, o.metrics, task_status=task_status)
        finally:
            with trio.CancelScope(shield=True):
                await redis.aclose()

    def drain() -> None:
        for w in holder:
            w.drain()

    try:
        ready = lambda binds: f"worker ready {' '.join(binds or [])}".strip()  # noqa: E731
        run_until_signal(worker, ready, drain)
    finally:
        if tracer is not None:
            tracer.shutdown()  # what the batch processor still holds goes out
