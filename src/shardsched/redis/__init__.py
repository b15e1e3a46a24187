"""The trio RESP connection and pool used by the service processes."""

from shardsched.redis.connection import (
    Connection,
    Redis,
    RedisBusyError,
    RedisConnectionError,
    RedisError,
    RedisURL,
    ReplyError,
    check_url,
    connect,
)

__all__ = [
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
