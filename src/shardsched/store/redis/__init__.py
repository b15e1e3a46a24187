"""The trio Redis clients of the service processes: one server (:class:`Redis`) or a
Redis Cluster (:class:`~.cluster.ClusterRedis`, same interface), chosen by URL."""

from typing import Any

from shardsched.store.redis.blocking import BlockingPop, blocking_pop
from shardsched.store.redis.cluster import CLUSTER_SCHEMES, ClusterRedis, parse_cluster_url
from shardsched.store.redis.connection import Connection, Redis, RedisURL
from shardsched.store.redis.errors import (
    RedisBusyError,
    RedisConnectionError,
    RedisError,
    ReplyError,
)
from shardsched.store.redis.tls import client_context


def connect(url: str, **options: Any) -> Any:
    """The client for a URL: :class:`Redis` for ``redis://``, a cluster-routing client for
    ``redis+cluster://host:port[,host:port…]`` (same interface)."""
    if url.startswith(CLUSTER_SCHEMES):
        return ClusterRedis(url, **options)
    return Redis(url, **options)


def check_url(url: str) -> None:
    """Raise ValueError for a URL neither client takes."""
    if url.startswith(CLUSTER_SCHEMES):
        for seed in parse_cluster_url(url):
            if seed.tls is not None:
                client_context(seed.tls)
    else:
        parsed = RedisURL.parse(url)
        if parsed.tls is not None:
            client_context(parsed.tls)  # the CA, certificate and key files load


__all__ = [
    "BlockingPop",
    "ClusterRedis",
    "Connection",
    "Redis",
    "RedisBusyError",
    "RedisConnectionError",
    "RedisError",
    "RedisURL",
    "ReplyError",
    "blocking_pop",
    "check_url",
    "connect",
]
