"""An owner's event chores, each maintenance round in every shard it holds: deliver an
event left pending past PENDING_GRACE_S (its receiver died between storing and settling
it: store/event_delivery.py), release the deliveries held for jobs resumed since
(lua/release_held.lua) and note on each event what became of it, dispatch the ended
firings of jobs that others run after (outq: lua/lib/outcomes.lua) to those jobs, and
forget events received more than EVENT_KEPT_S ago from the shard's log."""

from __future__ import annotations

import logging

from shardsched.core.events import EVENT_KEPT_S, PENDING_GRACE_S
from shardsched.core.ids import job_of_run
from shardsched.runtime.metrics import Metrics
from shardsched.store import event_delivery, ready
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.drive import drive_async, redis_calls
from shardsched.store.lua import events as lua
from shardsched.store.redis import Redis

log = logging.getLogger(__name__)
#: Pending events an owner delivers a round, per shard; ended firings it dispatches.
REDELIVER_BATCH = 200
OUTCOME_BATCH = 500


class EventChores:
    def __init__(self, redis: Redis, dep: Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics
        self.redelivered = 0  #: pending events this owner delivered
        self.released = 0  #: held deliveries released as runs
        self.after_runs = 0  #: runs made for jobs that run after an upstream's outcome

    async def round(self, held: list[tuple[int, int]]) -> None:
        if not held:
            return
        (now,) = await redis_calls(self.redis, [Call(("TIME",))])
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        late = now_ms - PENDING_GRACE_S * 1000
        calls = []
        for shard, _ in held:
            sk = self.dep.shard(shard)
            calls.append(Call(("ZRANGE", sk.events_pending, "-inf", late, "BYSCORE",
                               "LIMIT", 0, REDELIVER_BATCH)))  # fmt: skip
            calls.append(Call(("ZREMRANGEBYSCORE", sk.event_log, "-inf",
                               now_ms - EVENT_KEPT_S * 1000)))  # fmt: skip
        replies = await redis_calls(self.redis, calls)
        for (shard, _), pending in zip(held, replies[::2], strict=True):
            if isinstance(pending, Exception):
                log.error("pending events of shard %d: %s", shard, pending)
                continue
            for raw in pending:
                event_id = raw.decode()
                await drive_async(event_delivery.redeliver(self.dep, event_id), self.redis)
                self.redelivered += 1
                log.warning(
                    "event %s delivered by its owner: its receiver left it pending",
                    event_id, extra={"shard": shard},
                )  # fmt: skip
        await self._release(held)
        await self._outcomes(held)

    async def _outcomes(self, held: list[tuple[int, int]]) -> None:
        """Each held shard's ended firings delivered to the jobs that run after them, then
        trimmed (fenced): a crash between the two delivers them again, deduplicated."""
        calls = [
            Call(("LRANGE", self.dep.shard(shard).outcomes, 0, OUTCOME_BATCH - 1))
            for shard, _ in held
        ]
        for (shard, epoch), entries in zip(held, await redis_calls(self.redis, calls), strict=True):
            if isinstance(entries, Exception):
                log.error("outcomes of shard %d: %s", shard, entries)
                continue
            if not entries:
                continue
            made = await drive_async(
                event_delivery.dispatch_outcomes(self.dep, entries), self.redis
            )
            self.after_runs += sum(d.result == "created" for _rid, d in made)
            trim = lua.trim_outcomes(self.dep.shard(shard), epoch, len(entries), entries[0])
            await redis_calls(self.redis, [trim])

    async def _release(self, held: list[tuple[int, int]]) -> None:
        calls = [lua.release_held(self.dep.shard(shard), epoch) for shard, epoch in held]
        notes: list[Call] = []
        wakes: list[tuple[int, str]] = []
        for (shard, _), reply in zip(held, await redis_calls(self.redis, calls), strict=True):
            if isinstance(reply, Exception):
                log.error("held events of shard %d: %s", shard, reply)
                continue
            if reply[0] != 1:
                continue
            released, dropped = reply[1], reply[2]
            for i in range(0, len(released), 2):
                cause, run_id = released[i].decode(), released[i + 1].decode()
                if cause.startswith("event:"):  # an upstream's outcome has no record
                    event_id = cause.removeprefix("event:")
                    sk = self.dep.keys_for(event_id)
                    notes.append(lua.note_event(sk, event_id, job_of_run(run_id), run_id))
            for i in range(0, len(dropped), 2):
                cause, job_id = dropped[i].decode(), dropped[i + 1].decode()
                if cause.startswith("event:"):
                    event_id = cause.removeprefix("event:")
                    sk = self.dep.keys_for(event_id)
                    notes.append(lua.note_event(sk, event_id, job_id, "", "the job was deleted"))
            if released:
                self.released += len(released) // 2
                wakes += [(shard, q) for q in ready.woken(reply[3])]
        if wakes:
            await redis_calls(self.redis, ready.push_wakes(self.dep.globals, wakes))
        if notes:
            await redis_calls(self.redis, notes)
