"""The shard manager of a node process: membership, leases, one actor per owned shard.

Each round (every ``heartbeat_every_s``) it heartbeats into the node registry, learns the
live nodes, computes the shards it should own (:mod:`shardsched.core.assignment`), renews
the leases it holds (every ``renew_every_s``), hands over the ones it should no longer own
(actor stopped first, lease released after, so the next owner starts at once rather than
after a TTL), and acquires the ones it should own whose lease is free, lapsed, or held by
a node gone from the registry (killed: taken over within a registration TTL, not a lease
TTL). Beside them run the node's chores (maintenance, wake tokens, the event follower,
the notification dispatcher, the calendars).

Ownership is a Redis lease plus a fencing epoch (``lua/acquire_lease.lua``). An actor is
cancelled the moment its renewal fails; every script it calls is fenced by the epoch
anyway, so a paused former owner cannot write after losing its lease.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from dataclasses import dataclass, field

import msgspec
import trio

from shardsched.core.assignment import target_shards
from shardsched.core.pacing import Backoff
from shardsched.core.schedule import NextFireMemo
from shardsched.runtime.metrics import Metrics
from shardsched.runtime.tracing import RunTracer
from shardsched.shard.actor import LeaseLost, ShardActor
from shardsched.shard.calendar_book import CalendarBook
from shardsched.shard.dispatcher import Dispatcher
from shardsched.shard.follower import EventFollower
from shardsched.shard.maintenance import AutoResume, Maintainer
from shardsched.shard.queue_backlogs import QueueBacklogs
from shardsched.shard.reclaimer import Reclaimer
from shardsched.shard.runaway import end_runaway_script
from shardsched.shard.waker import Waker
from shardsched.store.calendars import CALENDARS_CHANGED
from shardsched.store.deployment import Deployment
from shardsched.store.drive import call_script, redis_calls
from shardsched.store.lua import leases
from shardsched.store.lua import runs as runs_lua
from shardsched.store.records import NodeInfo
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)

#: How often a node heartbeats into the registry (and looks at who else is alive); its
#: registration lasts three of these. A node gone from the registry loses its shards at
#: once (acquire_lease.lua takes a lease whose holder is not live): a kill -9 is taken
#: over in this registration time, not the lease TTL. Renewals keep their own pace.
HEARTBEAT_EVERY_S = 0.5


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class Owned:
    actor: ShardActor
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)


class ShardManager:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        node_id: str | None = None,
        lease_ttl_s: float = 5.0,
        renew_every_s: float = 2.0,
        batch: int = 500,
        http: str | None = None,
        metrics: Metrics | None = None,
        heartbeat_every_s: float = HEARTBEAT_EVERY_S,
        tracer: RunTracer | None = None,
        auto_resume: AutoResume | None = None,
    ) -> None:
        self.tracer = tracer  #: None: tracing is off (runtime/tracing.py)
        self.redis = redis
        self.dep = dep
        self.node_id = node_id or default_node_id()
        self.lease_ttl_ms = round(lease_ttl_s * 1000)
        self.renew_every_s = renew_every_s
        self.heartbeat_every_s = min(heartbeat_every_s, renew_every_s)
        self.registration_ttl_ms = round(3 * self.heartbeat_every_s * 1000)
        self.batch = batch
        self.http = http
        self.memo = NextFireMemo()
        self.metrics = metrics or Metrics()
        self.owned: dict[int, Owned] = {}  #: running actors
        self.leases: dict[int, int] = {}  #: shard -> epoch of every lease we hold
        self.live_nodes: list[str] = []
        self.refused_writes = 0
        self.lease_rounds = 0  #: lease rounds done (what a test waits on for "a round later")
        held = lambda: list(self.leases.items())  # noqa: E731
        self.maintainer = Maintainer(redis, dep, self.metrics, held, self.node_id, auto_resume)
        self.waker = Waker(redis, dep, self.metrics, lambda: list(self.leases))
        #: takes back runs whose worker lease lapsed, in every shard held
        self.reclaimer = Reclaimer(redis, dep, self.metrics, held, self.waker)
        self.follower = EventFollower(redis, dep, self.metrics, held, tracer)
        self.dispatcher = Dispatcher(redis, dep, self.metrics, self.node_id)
        self.calendars = CalendarBook(redis, dep, self.metrics)
        self.queue_backlogs = QueueBacklogs(redis, dep, self.metrics)
        self._started_ms = 0

    @property
    def auto_resumed(self) -> int:
        return self.maintainer.auto_resumed

    async def _heartbeat(self) -> frozenset[int]:
        g = self.dep.globals
        window = self.metrics.lag_window
        p99, p50 = window.quantiles((0.99, 0.5))
        info = msgspec.json.encode(
            NodeInfo(self.http, self._started_ms, sorted(self.owned), p99, window.total(), p50)
        )
        call = leases.heartbeat(g.nodes, g.node_info, self.node_id, self.registration_ttl_ms, info)
        now_ms, self.live_nodes = leases.decode_heartbeat(await call_script(self.redis, call))
        if not self._started_ms:
            self._started_ms = now_ms
        return target_shards(self.dep.n_shards, self.live_nodes, self.node_id)

    async def _acquire(self, nursery: trio.Nursery, shards: list[int]) -> None:
        calls = [
            leases.acquire_lease(
                self.dep.shard(s), self.node_id, self.lease_ttl_ms, self.live_nodes
            )
            for s in shards
        ]
        for shard, reply in zip(shards, await redis_calls(self.redis, calls), strict=True):
            if isinstance(reply, Exception):
                continue
            epoch = leases.decode_acquired(reply)
            if epoch is None:
                continue
            actor = ShardActor(
                self.redis,
                self.dep,
                shard,
                epoch,
                self.memo,
                self.batch,
                self.metrics,
                wake=self.waker.wake,
                tracer=self.tracer,
                calendars=self.calendars,
                queue_backlogs=self.queue_backlogs,
            )
            self.leases[shard] = actor.epoch
            self.metrics.ownership_changes.labels(str(shard)).inc()
            owned = self.owned[shard] = Owned(actor)
            await nursery.start(self._run_actor, owned, name=f"shard-{shard}")
            self.reclaimer.soon(-math.inf)  # a shard taken over: its lapsed leases now
            self.waker.wake(shard)  # and runs fired before may wait for a worker
            log.info(
                "node %s owns shard %d at epoch %d",
                self.node_id,
                shard,
                actor.epoch,
                extra={"node_id": self.node_id, "shard": shard, "epoch": actor.epoch},
            )

    async def _run_actor(self, owned: Owned, *, task_status: trio.TaskStatus[None]) -> None:
        shard = owned.actor.shard
        try:
            with owned.scope:
                await owned.actor.run(task_status=task_status)
        except LeaseLost as exc:
            self.refused_writes += 1
            self.metrics.refused.inc()
            self.leases.pop(shard, None)
            log.warning(
                "%s",
                exc,
                extra={"node_id": self.node_id, "shard": shard, "epoch": owned.actor.epoch},
            )
        finally:
            if self.owned.get(shard) is owned:
                del self.owned[shard]
            owned.done.set()

    async def _renew(self) -> None:
        held = list(self.leases.items())
        calls = [
            leases.renew_lease(self.dep.shard(s), self.node_id, epoch, self.lease_ttl_ms)
            for s, epoch in held
        ]
        for (shard, epoch), reply in zip(held, await redis_calls(self.redis, calls), strict=True):
            if reply == leases.LEASE_LOST and self.leases.get(shard) == epoch:
                self.refused_writes += 1
                log.warning("node %s lost the lease of shard %d", self.node_id, shard)
                del self.leases[shard]
                if (owned := self.owned.pop(shard, None)) is not None:
                    owned.scope.cancel()

    async def _hand_over(self, shards: list[int]) -> None:
        """Stop the actors, then release their leases so the new owner need not wait."""
        stopping = [self.owned.pop(s) for s in shards if s in self.owned]
        for owned in stopping:
            owned.scope.cancel()
        for owned in stopping:
            await owned.done.wait()
        releasing = [(s, self.leases.pop(s)) for s in shards if s in self.leases]
        calls = [
            leases.release_lease(self.dep.shard(s), self.node_id, epoch) for s, epoch in releasing
        ]
        if calls:
            with trio.move_on_after(2, shield=True):
                try:
                    await redis_calls(self.redis, calls)
                except RedisError:
                    pass  # the leases lapse by themselves
        if releasing:
            log.info("node %s handed over shards %s", self.node_id, [s for s, _ in releasing])

    def wake(self, shard: int | None = None) -> None:
        if shard is None:
            for owned in self.owned.values():
                owned.actor.wake()
        elif (one := self.owned.get(shard)) is not None:
            one.actor.wake()

    async def _listen_wakes(self, *, task_status: trio.TaskStatus[None]) -> None:
        started = False
        async for msg in self.redis.subscribe(self.dep.globals.wake_channel):
            if msg is None:
                self.wake()  # (re)subscribed: anything may have changed meanwhile
                self.reclaimer.soon(-math.inf)  # and a claim's deadline may have been missed
                if not started:
                    task_status.started()
                    started = True
            elif msg == CALENDARS_CHANGED:
                self.calendars.changed()
            elif (hint := runs_lua.reclaim_hint(msg)) is not None:
                shard, at_ms = hint
                if shard in self.leases:
                    self.reclaimer.hint(at_ms)
            else:
                self.wake(int(msg))

    async def _round(self, nursery: trio.Nursery, renew: bool = True) -> None:
        target = await self._heartbeat()
        if renew:
            await self._renew()
        leaving = [s for s in self.leases if s not in target]
        if leaving:
            await self._hand_over(leaving)
        missing = sorted(s for s in target if s not in self.leases)
        if missing:
            await self._acquire(nursery, missing)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold leases and run actors until cancelled; ready once the first round is done.

        On the way out every lease is handed back and the node leaves the registry.
        """
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._listen_wakes, name="wake-listener")
                await nursery.start(self.calendars.run, name="calendars")  # before any fire
                await nursery.start(self.queue_backlogs.run, name="queue-backlogs")
                nursery.start_soon(self.reclaimer.run, name="reclaimer")
                nursery.start_soon(self.maintainer.run, name="maintenance")
                nursery.start_soon(self.waker.run, name="waker")
                nursery.start_soon(self.follower.run, name="event-follower")
                nursery.start_soon(self.dispatcher.run, name="notification-dispatcher")
                started = False
                backoff = Backoff(first=self.renew_every_s / 4, cap=self.renew_every_s)
                renew_at = -math.inf
                while True:
                    pause = self.heartbeat_every_s
                    try:
                        renew = trio.current_time() >= renew_at
                        await self._round(nursery, renew)
                        if renew:
                            renew_at = trio.current_time() + self.renew_every_s - pause / 2
                        self.lease_rounds += 1
                        backoff.reset()
                    except RedisError as exc:
                        pause = backoff.next()
                        busy = str(exc).startswith("BUSY")
                        if busy and await end_runaway_script(self.redis, self.node_id):
                            pause = 0  # Redis answers again: renew at once
                        self.metrics.redis_error(
                            log, f"node {self.node_id}: lease round", exc, pause
                        )
                    if not started:
                        task_status.started()
                        started = True
                    await trio.sleep(pause)
        finally:
            await self.leave()

    async def leave(self) -> None:
        """Hand every shard back at once and leave the registry (graceful stop)."""
        with trio.CancelScope(shield=True):
            with trio.move_on_after(3):
                await self._hand_over(list(self.leases))
                g = self.dep.globals
                try:
                    await self.redis.pipeline(
                        [("ZREM", g.nodes, self.node_id), ("HDEL", g.node_info, self.node_id)]
                    )
                except RedisError:
                    pass
