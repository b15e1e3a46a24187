"""The wrapper of fire.lua, the shard owner's hot path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shardsched.store.calls import Call
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import signature
from shardsched.store.lua.runs import Fenced

FIRE = signature(
    "fire",
    keys=("timer", "ready", "epoch", "stats", "retries", "autopause"),
    argv=("epoch", "base", "count", "look-ahead", "missed"),
    item=("job id", "old score", "tick", "new score", "skip record", "overlap"),
)


def fire(
    sk: ShardKeys,
    *,
    epoch: int,
    count: int,
    lookahead_ms: int,
    missed: int,
    items: Sequence[Any],
) -> Call:
    """Fire a batch of planned items (flattened, 6 fields each) and read the next due
    batch; decode with :func:`decode_fired`."""
    return FIRE.call(
        (sk.timer, sk.ready, sk.epoch, sk.stats, sk.retries, sk.autopause),
        (epoch, sk.base, count, lookahead_ms, missed),
        items,
    )


@dataclass(frozen=True, slots=True)
class Fired:
    """What fire.lua answered: the clock, runs created, the next wake-up, due jobs."""

    now_ms: int
    fired: int
    retried: int  #: retry attempts moved to the ready stream
    next_ms: int | None  #: the earliest future timer or retry score; None: none, or due now
    due: Sequence[Any]  #: job id, score, timing JSON, ... (3 fields each)


def decode_fired(reply: Sequence[Any]) -> Fired | int:
    """The reply, or the shard's current epoch when the caller's is stale."""
    if reply[0] == Fenced.STALE_EPOCH:
        return int(reply[1])
    next_ms = reply[4]
    return Fired(
        int(reply[1]), int(reply[2]), int(reply[3]), int(next_ms) if next_ms else None, reply[5:]
    )
