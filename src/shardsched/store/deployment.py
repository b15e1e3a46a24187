"""A deployment: its namespace and shard count, and so where each id's keys live."""

from __future__ import annotations

from dataclasses import dataclass

from shardsched.core.errors import ConfigError
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check


@dataclass(frozen=True, slots=True)
class Deployment:
    """Where a deployment's keys live: its namespace and shard count."""

    namespace: str = k.DEFAULT_NAMESPACE
    n_shards: int = k.DEFAULT_SHARDS

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


def open_deployment(namespace: str, n_shards: int | None, archive: str | None = None) -> Op:
    """Read the deployment's shard count, fixing it at first start, and its archive.

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
    replies = yield calls
    stored = int(check(replies[1]))
    if n_shards is not None and stored != n_shards:
        raise ConfigError(
            f"this deployment has {stored} shards (fixed at first start); "
            f"refusing --shards {n_shards}"
        )
    return Deployment(namespace, stored)
