"""The trio Redis clients of the service processes: one server (:class:`Redis`), a
Redis Cluster (:class:`~.cluster.ClusterRedis`) or the primary the sentinels name
(:class:`~.sentinel.SentinelRedis`), one interface, chosen by URL."""

from typing import Any

import trio

from shardsched.store.redis.blocking import BlockingPop, blocking_pop
from shardsched.store.redis.cluster import CLUSTER_SCHEMES, ClusterRedis, parse_cluster_url
from shardsched.store.redis.connection import Connection, Durable, Redis, RedisURL
from shardsched.store.redis.errors import (
    RedisBusyError,
    RedisConnectionError,
    RedisError,
    RedisNotDurable,
    ReplyError,
)
from shardsched.store.redis.sentinel import SENTINEL_SCHEMES, SentinelRedis, SentinelURL
from shardsched.store.redis.tls import client_context


def connect(url: str, **options: Any) -> Any:
    """The client for a URL: :class:`Redis` for ``redis://``, a cluster-routing client for
    ``redis+cluster://host:port[,host:port…]``, a primary-following one for
    ``redis+sentinel://host:port[,host:port…]/service`` (same interface)."""
    if url.startswith(CLUSTER_SCHEMES):
        return ClusterRedis(url, **options)
    if url.startswith(SENTINEL_SCHEMES):
        return SentinelRedis(url, **options)
    return Redis(url, **options)


async def follow_primary(
    redis: Any, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """For a long-lived process: follow the sentinels' ``+switch-master`` (a Sentinel
    client), until cancelled; returns at once for any other client."""
    if isinstance(redis, SentinelRedis):
        await redis.follow(task_status=task_status)
    else:
        task_status.started()


def use_durability(redis: Any, dep: Any) -> None:
    """Put the deployment's durable mode (``dep.durable``, store/deployment.py) on a client."""
    d = dep.durable
    redis.set_durability(
        None if d is None else Durable(d.replicas, d.timeout_ms, dep.globals.durable_channel)
    )


def check_url(url: str) -> None:
    """Raise ValueError for a URL neither client takes."""
    if url.startswith(CLUSTER_SCHEMES):
        for seed in parse_cluster_url(url):
            if seed.tls is not None:
                client_context(seed.tls)
    elif url.startswith(SENTINEL_SCHEMES):
        spec = SentinelURL.parse(url)
        if spec.server.tls is not None:
            client_context(spec.server.tls)
    else:
        parsed = RedisURL.parse(url)
        if parsed.tls is not None:
            client_context(parsed.tls)  # the CA, certificate and key files load


__all__ = [
    "BlockingPop",
    "ClusterRedis",
    "Connection",
    "Durable",
    "Redis",
    "RedisBusyError",
    "RedisConnectionError",
    "RedisError",
    "RedisNotDurable",
    "RedisURL",
    "ReplyError",
    "SentinelRedis",
    "blocking_pop",
    "check_url",
    "connect",
    "follow_primary",
    "use_durability",
]
