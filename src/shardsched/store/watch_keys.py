"""A shard's keys of what its owner watches over time, in the shard's hash slot: the runs'
start and finish deadlines, and the jobs' dead-man's switches (lua/deadlines.lua)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WatchKeys:
    base: str  #: the shard's key base, ``<ns>:{<shard>}:``

    @property
    def deadlines(self) -> str:
        """ZSET ``s|<run>`` (``sk|``: skip it if late) / ``f|<run>`` -> the run's start /
        finish deadline (ms): fire.lua adds, lua/deadlines.lua takes the due ones."""
        return self.base + "deadlines"

    @property
    def deadman(self) -> str:
        """ZSET job_id -> when it is due a successful run (ms): its dead-man's switch,
        armed at registration and by each success (complete.lua), fired by
        lua/deadlines.lua."""
        return self.base + "deadman"
