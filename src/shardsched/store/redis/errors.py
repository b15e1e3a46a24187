"""What a Redis client raises: a failure talking to Redis, an error reply (one that
passes, such as BUSY or LOADING, apart), a lost connection, one never made, and a
handshake refused, with what to do about it."""

from __future__ import annotations

from shardsched.core.errors import RedisUnavailable, ShardschedError, is_transient_reply


class RedisError(ShardschedError):
    """Raised for any failure talking to Redis."""


class ReplyError(RedisError):
    """Raised when Redis answers a command with an error reply."""


class RedisBusyError(ReplyError, RedisUnavailable):
    """Raised for an error reply that passes (OOM, LOADING, BUSY, READONLY, MISCONF, ...):
    the call changed nothing; back off and retry."""


class RedisConnectionError(RedisError):
    """Raised when the connection to Redis is lost or cannot be made in time."""


class RedisNotDurable(RedisConnectionError):
    """Raised in the durable mode when fewer replicas than asked acknowledged a call's
    writes in time: it ran on the primary, but a failover may lose it. As for a lost
    connection, the caller sends it again (every script is idempotent) or gives up."""


class RedisConnectError(RedisConnectionError):
    """Raised when no connection could be made: nothing was sent, so a retry elsewhere is
    safe."""


class RedisRefusedError(RedisConnectError):
    """Raised when Redis accepts the connection but refuses to serve it (protected mode,
    authentication, ACL permissions): nothing was sent but the handshake. The message says
    what to do; an operator's fix, so the caller retries loudly rather than dies."""


#: What to do about a refused handshake, by the error reply's code.
_REFUSAL_HINTS = {
    "DENIED": "Redis is in protected mode and refuses clients from other hosts without a"
    " password: give it a password (requirepass or an ACL user) and put it in the URL,"
    " or bind it to the interface you connect from",
    "NOAUTH": "Redis wants a password: put it in the URL (redis://:PASSWORD@host:port/db,"
    " or redis://USER:PASSWORD@… for an ACL user), or in SHARDSCHED_REDIS_URL",
    "WRONGPASS": "the user name or password in the Redis URL is wrong",
    "ERR": "check the URL's user, password and db number",
    "NOPERM": "the Redis ACL user lacks a permission shardsched needs (scripting, streams,"
    " pub/sub and its keys)",
}


def refusal(host: str, port: int, reply: BaseException) -> RedisRefusedError:
    """The refusal of a handshake, saying what to do about it."""
    text = str(reply)
    code = text.split(" ", 1)[0]
    hint = _REFUSAL_HINTS.get(code, _REFUSAL_HINTS["ERR"])
    return RedisRefusedError(f"Redis at {host}:{port} refused us: {text} ({hint})")


def reply_error(reply: BaseException) -> ReplyError:
    """Our exception for an error reply: :class:`RedisBusyError` when it passes."""
    return RedisBusyError(str(reply)) if is_transient_reply(str(reply)) else ReplyError(str(reply))


def demoted(reply: BaseException) -> bool:
    """Whether an error reply says the server is a replica now (no longer the primary):
    READONLY, or the durable mode's WAIT refused by a replica."""
    text = str(reply)
    return text.split(" ", 1)[0] == "READONLY" or "WAIT cannot be used with replica" in text
