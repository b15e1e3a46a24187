"""Whether the Redis a node runs on keeps what it is given: its eviction policy, and
enough replicas for the durable mode."""

from __future__ import annotations

import logging

from shardsched.core.errors import ConfigError
from shardsched.store.deployment import Durability
from shardsched.store.redis import Redis, RedisError, ReplyError

log = logging.getLogger(__name__)


async def check_redis_config(redis: Redis, allow_eviction: bool) -> None:
    """Refuse an eviction policy: any of them can drop leases or ledger entries (see
    docs/deployment.md, "Deployments and their durability").
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


async def say_durability(redis: Redis, d: Durability) -> None:
    """Log the durable mode, and loudly when the primary has fewer replicas than it waits
    for (every write would then be answered "not durable")."""
    log.info("durable mode: every write waits for %d replica(s), up to %d ms",
             d.replicas, d.timeout_ms)  # fmt: skip
    try:
        info = await redis.execute("INFO", "replication")
    except RedisError:
        return
    fields = dict(line.split(":", 1) for line in info.decode().splitlines() if ":" in line)
    connected = int(fields.get("connected_slaves", "0"))
    if connected < d.replicas:
        log.warning(
            "the durable mode waits for %d replica(s) but the primary has %d connected:"
            " nothing will be acknowledged until there are enough", d.replicas, connected,
        )  # fmt: skip
    elif connected > d.replicas:
        log.warning(
            "the durable mode waits for %d replica(s) of the %d connected: a failover that"
            " promotes one that had not acknowledged loses what it had not (wait for every"
            " replica that may be promoted: docs/operations.md)", d.replicas, connected,
        )  # fmt: skip
