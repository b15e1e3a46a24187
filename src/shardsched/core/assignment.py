"""Which node should own which shard: balanced rendezvous hashing, pure.

Every node computes the same answer from the same list of live nodes. Plain rendezvous
hashing (each shard to the node with the highest hash of (node, shard)) moves few shards
when nodes come and go but can be uneven (64 shards over 4 nodes: often 12 to 21 each);
here each node's share is capped at the fair share (N // k, plus one for N % k of them),
and a shard whose favourite is full goes to its next favourite. The spread is then at most
one shard, and most shards still stay put when membership changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache


def _weight(node: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{node}/{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@lru_cache(maxsize=64)
def assign(n_shards: int, nodes: tuple[str, ...]) -> dict[str, frozenset[int]]:
    """Map each live node to the shards it should own (every shard to exactly one node)."""
    if not nodes:
        return {}
    live = sorted(set(nodes))
    base, extra = divmod(n_shards, len(live))
    # Who gets the extra shard is itself decided by hashing, not by name order.
    by_luck = sorted(live, key=lambda n: _weight(n, -1), reverse=True)
    capacity = {n: base + (1 if i < extra else 0) for i, n in enumerate(by_luck)}
    owned: dict[str, set[int]] = {n: set() for n in live}
    for shard in range(n_shards):
        for node in sorted(live, key=lambda n: _weight(n, shard), reverse=True):
            if len(owned[node]) < capacity[node]:
                owned[node].add(shard)
                break
    return {n: frozenset(s) for n, s in owned.items()}


def target_shards(n_shards: int, live: Sequence[str], node_id: str) -> frozenset[int]:
    return assign(n_shards, tuple(sorted(live))).get(node_id, frozenset())
