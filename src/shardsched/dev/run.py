"""``shardsched dev``: everything in one command, on an embedded redis-server.

Starts redis-server in the data dir (AOF on with fsync always, noeviction, loopback only,
a random password) unless ``--redis`` is given, one node owning every shard with the HTTP
API, and ``--workers`` worker processes, and keeps them alive (:mod:`.supervisor`). Every
child is held on this process's :mod:`~shardsched.runtime.lifeline`, so even a kill -9 of
``dev`` takes them along, and Ctrl-C / SIGTERM stops them all in order (the node and the
workers, then Redis), so nothing is left behind either way.

What dev protects (docs/security.md): its data dir is 0700 and its secrets 0600 (the
admin token, the Redis URL with its password, the Redis config, the AOF), so no other
local user can read the data or write to its Redis; the jobs it runs start in a scratch
directory of their own, not in the project or the data dir.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import trio

from shardsched import ops, service
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.errors import ConfigError
from shardsched.dev.supervisor import Supervisor
from shardsched.ops.access import tokens
from shardsched.router.guards import AccessPolicy
from shardsched.router.login_links import LINK_TTL_S, LoginLinks
from shardsched.runtime import lifetime
from shardsched.runtime.redis_server import (
    free_port,
    redis_server_args,
    spawn,
    start_cluster,
    stop_process,
    wait_for_redis,
)
from shardsched.runtime.sentinel_group import start_sentinel_group
from shardsched.runtime.tracing import tracer_from_env
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis, RedisConnectionError
from shardsched.store.retention import RetentionDefaults

log = logging.getLogger(__name__)

TOKEN_FILE = "token"
#: Where dev writes the URL of its Redis (a random port and password), for the SDK and
#: the tools.
REDIS_URL_FILE = "redis-url"
#: The embedded server's config: its password, kept out of argv (ps shows argv).
REDIS_CONF_FILE = "redis.conf"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by this user only (0600): it may hold a password."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC


DEV_TOKEN_NAME = "dev-admin"
DEV_ACTOR = "shardsched dev"


async def ensure_admin_token(redis: Redis, dep: ops.Deployment, data_dir: Path) -> Path:
    """The data dir's admin token: made on first start (or when the one on file no longer
    works), written 0600. Only the file holds the secret; Redis keeps its hash."""
    path = data_dir / TOKEN_FILE
    if path.exists():
        known = await drive_async(tokens.authenticate(dep, path.read_text().strip()), redis)
        if known is not None:
            return path
    await drive_async(tokens.forget_token(dep, DEV_TOKEN_NAME, DEV_ACTOR), redis)
    request = TokenRequest(name=DEV_TOKEN_NAME, scopes=[Scope.ADMIN])
    created = await drive_async(tokens.create_token(dep, request, DEV_ACTOR), redis)
    write_private(path, created.token + "\n")
    return path


#: What dev keeps in its data dir: a directory holding only these may be made private.
_DEV_FILES = {TOKEN_FILE, REDIS_URL_FILE, REDIS_CONF_FILE, "redis.log", "appendonlydir",
              "archive", "cluster", "dump.rdb"}  # fmt: skip


def private_dir(path: Path) -> Path:
    """``path``, made if need be, readable by this user only (0700). A directory that
    holds anything but dev's own files (``--data-dir .``) is left as it is, with a warning:
    dev does not change the mode of a directory it does not own."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        if {p.name for p in path.iterdir()} <= _DEV_FILES:
            os.chmod(path, 0o700)
        else:
            log.warning(
                "dev's data dir %s is open to other users (mode %o) and holds more than "
                "dev's files: chmod 700 it, or give dev a --data-dir of its own",
                path,
                mode,
            )
    return path


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files made meanwhile (by a child started meanwhile, too) are this user's alone."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


async def run_dev(
    *,
    http: str,
    data_dir: Path,
    redis_url: str | None,
    shards: int | None,
    workers: int,
    concurrency: int,
    namespace: str,
    cluster: int = 0,
    sentinel_replicas: int = 0,
    queues: str = "default",
    policy: AccessPolicy | None = None,
    tls: service.TlsFiles | None = None,
    archive: str | None = None,
    retention: RetentionDefaults | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    policy = policy or service.access_policy(http)
    cluster_procs: list[trio.Process] = []  # a cluster's nodes, or a sentinel group's
    sup = Supervisor()
    children_done = trio.Event()  # Redis stops after the node and the workers
    scratch = Path(tempfile.mkdtemp(prefix="shardsched-dev-jobs-"))
    try:
        async with trio.open_nursery() as outer:
            try:
                if redis_url is None and cluster:
                    # a fresh cluster each time: its nodes.conf holds this run's ports
                    root = data_dir.resolve() / "cluster" / str(os.getpid())
                    cluster_procs, redis_url = await start_cluster(cluster, root)
                    shown = redis_url
                elif redis_url is None and sentinel_replicas:
                    root = private_dir(data_dir).resolve() / "sentinel" / str(os.getpid())
                    with private_umask():
                        group = await start_sentinel_group(
                            root, sentinel_replicas, 3, 2000, sentinel_auth=True
                        )
                    cluster_procs = list(group.procs.values())
                    redis_url = group.url
                    shown = (
                        f"{data_dir / REDIS_URL_FILE}: primary :{group.primary_port}, replicas "
                        f"{', '.join(f':{p}' for p in group.replica_ports)}, sentinels "
                        f"{', '.join(f':{p}' for p in group.sentinel_ports)}"
                    )
                elif redis_url is None:
                    redis_url = await _embedded_redis(outer, sup, data_dir, children_done)
                    shown = str(data_dir / REDIS_URL_FILE)  # it holds the password
                else:
                    shown = redis_url
                redis, dep = await service.open_redis(redis_url, namespace, shards, archive=archive)
                await service.check_redis_config(redis, allow_eviction=False)
                sup.attach(redis, dep)
                await sup.publish()  # what it knows so far: the embedded server
                outer.start_soon(sup.republish, name="dev-republish")
                write_private(private_dir(data_dir) / REDIS_URL_FILE, redis_url + "\n")
                hint = ""
                links = LoginLinks()
                if policy.auth:
                    token_file = await ensure_admin_token(redis, dep, data_dir)
                    code = links.issue(token_file.read_text().strip())
                    hint = (
                        f"admin token in {token_file} (mode 0600): the CLI reads it from there "
                        "when run in this directory, or set SHARDSCHED_TOKEN; curl needs "
                        f'-H "Authorization: Bearer $(cat {token_file})"\n'
                    )
                # notifications link to the console's run pages (shard/dispatcher.py)
                scheme = "https://" if tls else "http://"
                os.environ.setdefault("SHARDSCHED_PUBLIC_URL", scheme + http)
                # its node runs here, so its tracer is made here (its workers make theirs)
                tracer = tracer_from_env("shardsched-node")
                node = partial(
                    service.run_node,
                    redis,
                    dep,
                    http=http,
                    node_id="dev-node",
                    policy=policy,
                    tls=tls,
                    retention=retention,
                    archive=archive,
                    login_links=links,
                    tracer=tracer,
                )
                worker = [sys.executable, "-m", "shardsched", "worker", "--namespace", namespace]
                worker += ["--concurrency", str(concurrency), "--queues", queues]
                try:
                    async with trio.open_nursery() as children:
                        for i in range(workers):
                            name = f"dev-worker-{i + 1}"
                            start = partial(
                                spawn,
                                [*worker, "--worker-id", name],
                                env={"SHARDSCHED_REDIS_URL": redis_url},  # ps shows argv
                                stdout=subprocess.DEVNULL,
                                cwd=scratch,  # a job starts in the scratch dir, not the project
                            )
                            await children.start(sup.keep_process, name, "worker", start)
                        binds = await children.start(sup.keep_task, "dev-node", "node", node)
                        api = binds[0] if binds else f"http://{http}"
                        login = (
                            f"console: {api}/ui/login/{code}  (a one-time link, good for"
                            f" {LINK_TTL_S / 60:.0f} minutes; then {api}/ui/ with the token)\n"
                            if policy.auth
                            else f"console: {api}/ui/\n"
                        )
                        task_status.started(
                            f"{hint}jobs start in {scratch}\n{login}"
                            f"shardsched dev ready: API {api}/api/v1  (redis: {shown})"
                        )
                finally:
                    await sup.forget()
                    if tracer is not None:
                        tracer.shutdown()  # what the batch processor still holds goes out
            finally:
                children_done.set()  # even when set-up failed
    finally:
        for proc in cluster_procs:
            await stop_process(proc, grace=10.0)
        shutil.rmtree(scratch, ignore_errors=True)


async def _embedded_redis(
    nursery: trio.Nursery, sup: Supervisor, data_dir: Path, children_done: trio.Event
) -> str:
    """Start the embedded redis-server (kept alive by ``sup``, stopped after
    ``children_done``) behind a fresh random password; its URL once it answers."""
    port = free_port()
    password = secrets.token_urlsafe(24)
    conf = private_dir(data_dir).resolve() / REDIS_CONF_FILE
    write_private(conf, f"requirepass {password}\n")
    args = redis_server_args(port, data_dir.resolve(), config_file=conf)

    async def start() -> trio.Process:
        with private_umask():  # its AOF and log: 0600
            return await spawn(args, stdout=subprocess.DEVNULL)

    await nursery.start(
        partial(sup.keep_process, "redis-server", "redis", start, stop_after=children_done)
    )
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    try:
        await wait_for_redis(url)
    except RedisConnectionError as exc:
        raise ConfigError(
            f"embedded redis-server did not start (see {data_dir / 'redis.log'}): {exc}"
        ) from None
    return url


def main(
    args: argparse.Namespace,
    archive: str | None = None,
    retention: RetentionDefaults | None = None,
) -> None:
    """``shardsched dev``: ``archive`` and ``retention`` come from the CLI's flags."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    lifetime.run_until_signal(
        lambda task_status: run_dev(
            http=args.http,
            data_dir=Path(args.data_dir),
            redis_url=args.redis,
            shards=args.shards,
            workers=args.workers,
            concurrency=args.concurrency,
            namespace=args.namespace,
            cluster=args.cluster,
            sentinel_replicas=(args.replicas or 1) if args.sentinel else 0,
            queues=args.queues,
            policy=service.access_policy(
                args.http,
                insecure_no_auth=args.insecure_no_auth,
                allow_hosts=args.allow_host,
                allow_origins=args.allow_origin,
                metrics_auth=args.metrics_auth,
            ),
            tls=None if args.certfile is None else service.TlsFiles(args.certfile, args.keyfile),
            archive=archive,
            retention=retention,
            task_status=task_status,
        ),
        lambda line: line,
    )
