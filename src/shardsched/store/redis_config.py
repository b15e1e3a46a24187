"""Whether the Redis a node runs on keeps what it is given: its eviction policy."""

from __future__ import annotations

import logging

from shardsched.core.errors import ConfigError
from shardsched.store.redis import Redis, ReplyError

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
