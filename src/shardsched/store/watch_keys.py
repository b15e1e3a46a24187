"""A shard's keys of its jobs' time policies, in the shard's hash slot: the runs' start and
finish deadlines and the jobs' dead-man's switches (lua/deadlines.lua), and the ticks a
buffered overlap holds (lua/lib/buffer.lua)."""

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

    def buffer(self, job_id: str) -> str:
        """LIST the ticks a job's overlap (buffer_one, buffer_all) holds while its active
        run goes on, oldest first: fire.lua pushes, a completion, cancel or lapse releases."""
        return self.base + "buf:" + job_id
