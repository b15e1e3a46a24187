"""The trio Redis clients of the service processes: one server (:class:`Redis`) or a
Redis Cluster (:class:`~.cluster.ClusterRedis`, same interface), chosen by URL."""

from typing import Any

from shardsched.store.redis.cluster import ClusterRedis, parse_cluster_url
from shardsched.store.redis.connection import (
    Connection,
    Redis,
    RedisBusyError,
    RedisConnectionError,
    RedisError,
    RedisURL,
    ReplyError,
)


def connect(url: str, **options: Any) -> Any:
    """The client for a URL: :class:`Redis` for ``redis://``, a cluster-routing client for
    ``redis+cluster://host:port[,host:port…]`` (same interface)."""
    if url.startswith("redis+cluster://"):
        return ClusterRedis(url, **options)
    return Redis(url, **options)


def check_url(url: str) -> None:
    """Raise ValueError for a URL neither client takes."""
    if url.startswith("redis+cluster://"):
        parse_cluster_url(url)
    else:
        RedisURL.parse(url)


__all__ = [
    "ClusterRedis",
    "Connection",
    "Redis",
    "RedisBusyError",
    "RedisConnectionError",
    "RedisError",
    "RedisURL",
    "ReplyError",
    "check_url",
    "connect",
]
