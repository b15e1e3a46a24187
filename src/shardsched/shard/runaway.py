"""What a node does when Redis answers BUSY to its lease round: a script has run past the
busy-reply threshold, and no lease can be renewed until it ends."""

from __future__ import annotations

import logging

from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)


async def end_runaway_script(redis: Redis, node_id: str) -> bool:
    """A script that wrote nothing (a reader's, or a user's gone astray) is ended now with
    SCRIPT KILL, so the leases outlive it; one that wrote cannot be (UNKILLABLE) and is
    waited out. Whether Redis answers again."""
    try:
        await redis.execute("SCRIPT", "KILL")
    except RedisError as exc:  # NOTBUSY: it ended meanwhile; UNKILLABLE; NOPERM
        log.warning("node %s: Redis is busy with a script: %s", node_id, exc)
        return str(exc).startswith("NOTBUSY")
    log.warning(
        "node %s: Redis was busy with a runaway read-only script: ended it (SCRIPT KILL)"
        " so that no lease lapses",
        node_id,
    )
    return True
