"""A deployment: its namespace and shard count, and so where each id's keys live."""

from __future__ import annotations

from dataclasses import dataclass

from shardsched.core.errors import ConfigError, RedisUnavailable
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check


@dataclass(frozen=True, slots=True)
class Durability:
    """The durable mode (docs/operations.md, "High availability"): a round trip is
    acknowledged only once ``replicas`` replicas have every write the primary made before
    its end (``PUBLISH`` then ``WAIT``), waited for up to ``timeout_ms``; otherwise it is
    answered as a lost connection: it may have run, send it again."""

    replicas: int
    timeout_ms: int = 1000

    def code(self) -> str:
        return f"{self.replicas}:{self.timeout_ms}"

    @classmethod
    def parse(cls, text: str | bytes | None) -> Durability | None:
        """The stored code (``replicas:timeout_ms``); None when off or not set."""
        if not text:
            return None
        replicas, _, timeout = (text.decode() if isinstance(text, bytes) else text).partition(":")
        if int(replicas) <= 0:
            return None
        return cls(int(replicas), int(timeout or 1000))


@dataclass(frozen=True, slots=True)
class Deployment:
    """Where a deployment's keys live: its namespace and shard count; and whether its
    writes wait for replicas (``durable``)."""

    namespace: str = k.DEFAULT_NAMESPACE
    n_shards: int = k.DEFAULT_SHARDS
    durable: Durability | None = None

    def keys_for(self, any_id: str) -> k.ShardKeys:
        return k.shard_keys(self.namespace, k.shard_of(any_id, self.n_shards))

    def shard(self, n: int) -> k.ShardKeys:
        return k.shard_keys(self.namespace, n)

    @property
    def globals(self) -> k.GlobalKeys:
        return k.GlobalKeys(self.namespace)

    def concurrency(self, key: str) -> k.ConcurrencyKeys:
        """The keys of concurrency key ``key`` (core/concurrency.py)."""
        return k.ConcurrencyKeys(self.namespace, key)

    def sweeper_of(self, key: str) -> int:
        """The shard whose owner sweeps concurrency key ``key`` (shard/limits.py)."""
        return k.sweeper_shard(key, self.n_shards)


def open_deployment(
    namespace: str,
    n_shards: int | None,
    archive: str | None = None,
    durable: Durability | None = None,
) -> Op:
    """Read the deployment's shard count, fixing it at first start, its archive and its
    durable mode (``durable`` sets it: ``replicas`` 0 turns it off; None keeps it).

    ``n_shards=None`` accepts whatever is stored (or the default for a new deployment);
    otherwise a mismatch raises ConfigError: a node started with another N refuses to run.
    A node started with ``archive`` records it (meta ``archive``), so every reader
    (router, SDK, CLI) finds archived runs where the owners put them.
    """
    meta = k.GlobalKeys(namespace).meta
    want = n_shards or k.DEFAULT_SHARDS
    # a role that may not write (worker, reader) is refused the HSETNX: it only reads
    calls = [Call(("HSETNX", meta, "shards", want), refusable=True), Call(("HGET", meta, "shards"))]
    if archive:
        calls.append(Call(("HSET", meta, "archive", archive)))
    if durable is not None:
        calls.append(Call(("HSET", meta, "durable", durable.code())))
    calls.append(Call(("HGET", meta, "durable")))
    replies = yield calls
    if replies[1] is None:  # the HSETNX was refused: a replica, or a worker's ACL user
        raise RedisUnavailable(
            f"there is no deployment {namespace!r} here and this Redis refuses to make one"
            f" ({str(replies[0]).split(chr(10))[0]}): a replica, or a user that may not write"
        )
    stored = int(check(replies[1]))
    if n_shards is not None and stored != n_shards:
        raise ConfigError(
            f"this deployment has {stored} shards (fixed at first start); "
            f"refusing --shards {n_shards}"
        )
    return Deployment(namespace, stored, Durability.parse(check(replies[-1])))
