"""The keys of one concurrency key (core/concurrency.py), apart from store/keys.py so each
module stays one concept: a key's holders, waiting runs, starts and limits."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConcurrencyKeys:
    """The keys of one concurrency key (core/concurrency.py), tagged ``{ck:<key>}``: one
    hash slot of their own, apart from every shard's, so the lua/ck_*.lua scripts change a
    key's state atomically whichever shards its runs are in."""

    namespace: str
    key: str

    @property
    def base(self) -> str:
        return f"{self.namespace}:{{ck:{self.key}}}:"

    @property
    def holders(self) -> str:
        """ZSET run_id -> hold deadline (ms): the runs holding the key (executing, or
        granted and not yet started: :attr:`reserved`)."""
        return self.base + "h"

    @property
    def reserved(self) -> str:
        """SET run_id: holders granted while waiting, put back on their ready stream and
        not yet claimed."""
        return self.base + "r"

    @property
    def waiting(self) -> str:
        """ZSET run_id -> ms * 1000 + arrival (mod 1000): runs over the limit, in order."""
        return self.base + "w"

    @property
    def starts(self) -> str:
        """ZSET run_id -> ms: starts within the rate limit's interval."""
        return self.base + "s"

    @property
    def state(self) -> str:
        """HASH 'seq' (arrivals), 'jl' (the limit its jobs gave)."""
        return self.base + "st"

    @property
    def limits(self) -> str:
        """HASH 'limit', 'rmax', 'rper' (ms): the key's own limits (a node writes them)."""
        return self.base + "lim"

    @property
    def changes(self) -> str:
        """LIST (capped) of JSON: who set the key's limits, when (lua/ck_set.lua)."""
        return self.base + "chg"

    def all(self) -> tuple[str, ...]:
        """The keys every ck script takes, in its KEYS order (not :attr:`limits`, which
        the scripts read beside :attr:`holders`: a worker may not write it)."""
        return (self.holders, self.reserved, self.waiting, self.starts, self.state)
