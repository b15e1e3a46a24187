"""Giving waiting runs their turn on a concurrency key: the store-level sequence the
worker (when a run ends), the shard owner's sweep and the operations (a limit raised, a
run released) all run, so none of them reaches it through another's layer.

Giving a turn crosses hash slots: the key's script granted it (in the key's slot), and the
run goes back on its ready stream in its shard's (lua/unpark_runs.lua). Between the two a
process may die: the grant is a reservation with a deadline, and the owner's sweep puts a
reserved run back again when no worker claimed it in time (shard/limits.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from shardsched.store.calls import Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import concurrency as lua
from shardsched.store.ready import Wake

#: Rounds of put-backs at most per call: each round gives back the grants of runs that
#: are gone and puts back the runs those grants passed to.
_ROUNDS = 8


def give_turns(dep: Deployment, key: str, run_ids: Iterable[str]) -> Op:
    """Put runs granted their turn on ``key`` back on their ready streams; a grant whose
    run is gone (ended, deleted) is given back, which may grant the next. Returns the
    wakes to push (:func:`store.ready.push_wakes`)."""
    turns = list(run_ids)
    wakes: set[Wake] = set()
    for _ in range(_ROUNDS):
        if not turns:
            break
        by_shard: dict[int, list[str]] = defaultdict(list)
        for rid in turns:
            by_shard[dep.keys_for(rid).shard].append(rid)
        shards = sorted(by_shard)
        replies = yield [lua.unpark_runs(dep.shard(s), by_shard[s]) for s in shards]
        gone: list[str] = []
        for shard, reply in zip(shards, replies, strict=True):
            queues, codes = lua.decode_moved(check(reply))
            if any(c == lua.Unparked.SCHEDULED for c in codes):
                wakes.update((shard, q) for q in queues)
            gone += [r for r, c in zip(by_shard[shard], codes, strict=True) if c == 0]
        if not gone:
            break
        (reply,) = yield [lua.ck_release(dep.concurrency(key), gone)]
        turns = list(lua.decode_turns(check(reply)))
    return sorted(wakes)
