"""Wrappers of the lease scripts: a shard owner's lease and fencing epoch, and the
node and worker registries' heartbeat."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardsched.store.calls import Call
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import signature

#: The code of a lease script refusing: another node holds the lease, or a newer epoch.
LEASE_LOST = -1

ACQUIRE_LEASE = signature(
    "acquire_lease", keys=("owner", "epoch"), argv=("node", "ttl", "live nodes")
)


def acquire_lease(sk: ShardKeys, node_id: str, ttl_ms: int, live_nodes: Sequence[str] = ()) -> Call:
    """Take a shard's lease: free, lapsed, or held by a node not in ``live_nodes`` (the
    registry as the caller just read it); decode with :func:`decode_acquired`."""
    return ACQUIRE_LEASE.call((sk.owner, sk.epoch), (node_id, ttl_ms, ",".join(live_nodes)))


def decode_acquired(reply: Sequence[Any]) -> int | None:
    """The new epoch, or None when another node holds the lease."""
    return None if reply[0] == LEASE_LOST else int(reply[0])


RENEW_LEASE = signature(
    "renew_lease", keys=("owner", "epoch", "stats"), argv=("node", "epoch", "ttl")
)


def renew_lease(sk: ShardKeys, node_id: str, epoch: int, ttl_ms: int) -> Call:
    """Extend a held lease; the reply is 1, or :data:`LEASE_LOST`."""
    return RENEW_LEASE.call((sk.owner, sk.epoch, sk.stats), (node_id, epoch, ttl_ms))


RELEASE_LEASE = signature("release_lease", keys=("owner", "epoch"), argv=("node", "epoch"))


def release_lease(sk: ShardKeys, node_id: str, epoch: int) -> Call:
    """Give a lease up at once; the reply is 1 released, 0 not held any more."""
    return RELEASE_LEASE.call((sk.owner, sk.epoch), (node_id, epoch))


HEARTBEAT = signature(
    "heartbeat", keys=("members", "info"), argv=("member", "ttl", "info", "answer")
)


def heartbeat(
    members: str, info_key: str, member: str, ttl_ms: int, info: bytes, answer: bool = True
) -> Call:
    """Register a node or worker for ``ttl_ms``; decode with :func:`decode_heartbeat`
    (the live members only when ``answer``)."""
    return HEARTBEAT.call((members, info_key), (member, ttl_ms, info, "1" if answer else "0"))


def decode_heartbeat(reply: Sequence[Any]) -> tuple[int, list[str]]:
    """The server's clock (ms) and the live members, sorted by id."""
    return int(reply[0]), [m.decode() for m in reply[1:]]
