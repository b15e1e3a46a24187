"""The shard manager of a node process: leases, one actor per owned shard, wake-ups.

Ownership is a Redis lease plus a fencing epoch (``lua/acquire_lease.lua``). The manager
renews every owned lease in one pipelined round trip per interval and stops an actor the
moment its renewal fails; every script the actor calls is fenced by the epoch anyway, so
a paused former owner cannot write after losing its lease.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field

import trio

from shardsched.ops import Deployment
from shardsched.redis import Redis, RedisConnectionError
from shardsched.shard.actor import LeaseLost, ShardActor
from shardsched.shard.cron import NextFireMemo

log = logging.getLogger(__name__)


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class Owned:
    actor: ShardActor
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class ShardManager:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        node_id: str | None = None,
        lease_ttl_s: float = 5.0,
        renew_every_s: float = 1.5,
        batch: int = 500,
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.node_id = node_id or default_node_id()
        self.lease_ttl_ms = round(lease_ttl_s * 1000)
        self.renew_every_s = renew_every_s
        self.batch = batch
        self.memo = NextFireMemo()
        self.owned: dict[int, Owned] = {}
        self._all_owned = trio.Event()

    def target_shards(self) -> list[int]:
        """The shards this node should own (all of them, until membership exists)."""
        return list(range(self.dep.n_shards))

    async def _acquire(self, nursery: trio.Nursery, shards: list[int]) -> None:
        calls = [
            (
                "acquire_lease",
                (self.dep.shard(s).owner, self.dep.shard(s).epoch),
                (self.node_id, self.lease_ttl_ms),
            )
            for s in shards
        ]
        for shard, reply in zip(shards, await self.redis.scripts(calls), strict=True):
            if isinstance(reply, Exception) or reply[0] == -1:
                continue
            actor = ShardActor(self.redis, self.dep, shard, int(reply[0]), self.memo, self.batch)
            owned = self.owned[shard] = Owned(actor)
            await nursery.start(self._run_actor, owned, name=f"shard-{shard}")
            log.info("node %s owns shard %d at epoch %d", self.node_id, shard, actor.epoch)

    async def _run_actor(self, owned: Owned, *, task_status: trio.TaskStatus[None]) -> None:
        shard = owned.actor.shard
        try:
            with owned.scope:
                await owned.actor.run(task_status=task_status)
        except LeaseLost as exc:
            log.warning("%s", exc)
        finally:
            if self.owned.get(shard) is owned:
                del self.owned[shard]

    async def _renew(self) -> None:
        shards = list(self.owned)
        calls = [
            (
                "renew_lease",
                (self.dep.shard(s).owner, self.dep.shard(s).epoch),
                (self.node_id, self.owned[s].actor.epoch, self.lease_ttl_ms),
            )
            for s in shards
        ]
        for shard, reply in zip(shards, await self.redis.scripts(calls), strict=True):
            if reply == -1 and shard in self.owned:
                log.warning("node %s lost the lease of shard %d", self.node_id, shard)
                self.owned.pop(shard).scope.cancel()

    def wake(self, shard: int | None = None) -> None:
        if shard is None:
            for owned in self.owned.values():
                owned.actor.wake()
        elif (owned := self.owned.get(shard)) is not None:
            owned.actor.wake()

    async def _listen_wakes(self, *, task_status: trio.TaskStatus[None]) -> None:
        started = False
        async for msg in self.redis.subscribe(self.dep.globals.wake_channel):
            if msg is None:
                self.wake()  # (re)subscribed: anything may have changed meanwhile
                if not started:
                    task_status.started()
                    started = True
            else:
                self.wake(int(msg))

    async def wait_all_owned(self) -> None:
        await self._all_owned.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold leases and run actors until cancelled; ready once the first pass is done."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._listen_wakes, name="wake-listener")
            started = False
            while True:
                try:
                    await self._renew()
                    missing = [s for s in self.target_shards() if s not in self.owned]
                    if missing:
                        await self._acquire(nursery, missing)
                except RedisConnectionError as exc:
                    log.warning("node %s: lease round failed: %s", self.node_id, exc)
                if len(self.owned) == self.dep.n_shards:
                    self._all_owned.set()
                if not started:
                    task_status.started()
                    started = True
                await trio.sleep(self.renew_every_s)

    async def release_all(self) -> None:
        """Hand every lease back at once (graceful stop), so a successor need not wait."""
        owned, self.owned = self.owned, {}
        for o in owned.values():
            o.scope.cancel()
        calls = [
            (
                "release_lease",
                (self.dep.shard(s).owner, self.dep.shard(s).epoch),
                (self.node_id, o.actor.epoch),
            )
            for s, o in owned.items()
        ]
        if calls:
            with trio.move_on_after(2, shield=True):
                try:
                    await self.redis.scripts(calls)
                except RedisConnectionError:
                    pass
