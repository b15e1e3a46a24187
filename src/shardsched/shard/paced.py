"""``catchup: paced``: the ticks a job owes after an outage (core/catchup.py decides which:
the newest ``max_catchup``) go to its owner's pacer as a paced backfill, at most its
``catchup_per_minute`` started a minute (lua/backfill.lua, then lua/release_paced.lua in
each maintenance round), while its timer moves on and its next tick fires on time.

The actor makes the backfill call before the fire call that moves the timer past the owed
ticks: an owner that dies between the two leaves them queued, and the next owner decides
the same again and queues nothing twice (run ids are the ticks'). The queued ticks are
pending in the ledger (ops/history/ledger.py) until they run."""

from __future__ import annotations

from collections.abc import Sequence

from shardsched.core.backfill import pace_ms
from shardsched.core.instants import from_ms
from shardsched.core.models import Timing
from shardsched.core.schedule import NextFireMemo
from shardsched.store.calls import Call
from shardsched.store.drive import redis_calls
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.redis import Redis
from shardsched.store.redis.errors import reply_error

#: Who the job's log of runs by hand names for a paced catch-up.
ACTOR = "scheduler"


def paced_catch_up(
    keys: ShardKeys,
    job: bytes | str,
    timing: Timing,
    owed: tuple[int, int],
    raw: bytes,
    memo: NextFireMemo,
) -> Call:
    """The backfill call of a job's owed ticks [first, last] (at most its max_catchup)."""
    first, last = owed
    ticks = [first]
    while len(ticks) < max(timing.max_catchup, 1):
        tick = memo.next_after(raw, ticks[-1])
        if tick is None or tick > last:
            break
        ticks.append(tick)
    job_id = job.decode() if isinstance(job, bytes) else job
    window = f"catch-up {from_ms(first).isoformat()}..{from_ms(ticks[-1]).isoformat()}"
    most = min(timing.per_minute, 1000)  # a minute's worth may be under way at once
    return jobs_lua.backfill(
        keys, job_id, most, ticks, ACTOR, window, "", pace_ms(timing.per_minute)
    )


async def hand_over(redis: Redis, calls: Sequence[Call]) -> None:
    """Make the calls; a Redis error reply raises (the actor retries the batch). A job
    deleted or paused meanwhile is refused by the script, and owes nothing."""
    for reply in await redis_calls(redis, calls):
        if isinstance(reply, Exception):
            raise reply_error(reply)
