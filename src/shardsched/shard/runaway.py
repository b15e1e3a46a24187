"""What a node does when Redis answers BUSY to its lease round: a script has run past the
busy-reply threshold, and no lease can be renewed until it ends."""

from __future__ import annotations

import logging

from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)


async def end_runaway_script(redis: Redis, node_id: str) -> bool:
    """A script that wrote nothing (a reader's, or a user's gone astray) is ended now with
    SCRIPT KILL (an EVAL's) or FUNCTION KILL (a function's: SCRIPT KILL answers BUSY to
    one), so the leases outlive it; one that wrote cannot be (UNKILLABLE) and is waited
    out. Whether Redis answers again."""
    for kill in (("SCRIPT", "KILL"), ("FUNCTION", "KILL")):
        try:
            await redis.execute(*kill)
        except RedisError as exc:  # NOTBUSY: it ended meanwhile; UNKILLABLE; NOPERM
            if kill[0] == "SCRIPT" and str(exc).startswith("BUSY"):
                continue  # a function: FUNCTION KILL ends it
            log.warning("node %s: Redis is busy with a script: %s", node_id, exc)
            return str(exc).startswith("NOTBUSY")
        log.warning(
            "node %s: Redis was busy with a runaway read-only script: ended it (%s)"
            " so that no lease lapses",
            node_id,
            " ".join(kill),
        )
        return True
    return False
