"""The shard actor: one trio task per owned shard, firing its timer exactly once per tick.

The actor holds no state that matters across a crash: the timer ZSET is the durable record
of what should fire (DESIGN §1). Each loop is one call of ``lua/fire.lua``, which fires the
batch computed from the previous answer and reports the next due batch, so a burst costs
one round trip per batch. Between bursts it sleeps until the earliest timer entry is due
on the Redis server's clock, or until woken because a job of the shard changed.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import trio

from shardsched.metrics import Metrics
from shardsched.models import Overlap
from shardsched.ops import Deployment
from shardsched.redis import Redis, RedisConnectionError, ReplyError
from shardsched.shard.catchup import Decision, decide
from shardsched.shard.cron import NextFireMemo

log = logging.getLogger(__name__)

_OVERLAP_CODE = {Overlap.ALLOW: "a", Overlap.FORBID: "f", Overlap.REPLACE: "r"}

#: How far ahead of its tick a due batch is read and planned (the fire script never fires
#: an item before its tick): planning then overlaps the wait instead of adding to the lag.
LOOKAHEAD_MS = 300

#: Longest sleep without a look at the timer: a safety net for a lost wake message only.
MAX_IDLE_S = 30.0


class LeaseLost(Exception):
    """Raised inside an actor when its epoch was superseded (another owner took over)."""


class ShardActor:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        shard: int,
        epoch: int,
        memo: NextFireMemo,
        batch: int = 500,
        metrics: Metrics | None = None,
    ) -> None:
        self.redis = redis
        self.keys = dep.shard(shard)
        self.shard = shard
        self.epoch = epoch
        self.memo = memo
        self.batch = batch
        self.fired_total = 0
        self.refused = 0
        self._ready_channel = dep.globals.ready_channel
        self._woken = trio.Event()
        self.metrics = metrics or Metrics()
        self._fires: list[int] = []  #: ticks the planned batch fires (for the lag histogram)
        self._missed: dict[str, int] = {}  #: job -> ticks found past time + misfire grace

    def wake(self) -> None:
        """Look at the timer again now (a job of this shard was added or changed)."""
        self._woken.set()

    def _plan(self, due: list[Any], now_ms: int) -> list[Any]:
        """The fire script's items for a due batch: pure computation, no I/O. Notes the
        ticks it fires and the ticks found missed (time plus grace passed) for the metrics."""
        items: list[Any] = []
        memo = self.memo
        fires = self._fires = []
        missed = self._missed = {}
        for i in range(0, len(due), 3):
            job, score, raw = due[i], due[i + 1], due[i + 2]
            old = int(float(score))
            if not raw:  # the job hash vanished under its timer entry: drop the entry
                items += (job, old, "", "", "", "a")
                continue
            overlap = "a"
            grace_ms = 60_000
            try:
                timing = memo.timing(raw)
                overlap = _OVERLAP_CODE[timing.overlap]
                grace_ms = round(timing.misfire_grace_s * 1000)
                decision = decide(timing, old, now_ms, lambda t, raw=raw: memo.next_after(raw, t))
            except (ValueError, msgspec.DecodeError):
                # Fire this tick and stop: a timer entry that stays due forever would spin.
                log.exception("shard %d: job %s has no next fire time", self.shard, job)
                decision = Decision(old, None)
            cutoff, late = now_ms - grace_ms, 0
            if decision.fire is not None:
                fires.append(decision.fire)
                late += decision.fire < cutoff
            if decision.skip is not None and decision.skip.first < cutoff:
                late += decision.skip.count
            if late:
                missed[job.decode() if isinstance(job, bytes) else job] = late
            items += (
                job,
                old,
                "" if decision.fire is None else decision.fire,
                "" if decision.new is None else decision.new,
                "" if decision.skip is None else decision.skip.encode(),
                overlap,
            )
        return items

    def _observe(self, now_ms: int, fired: int, took_s: float) -> None:
        """Metrics of one applied batch: lags by distinct value, missed ticks, write time."""
        metrics = self.metrics
        metrics.ledger_write.labels("fire").observe(took_s)
        if fired:
            metrics.fired.inc(fired)
            lags: dict[int, int] = {}
            for tick in self._fires:
                lag = now_ms - tick
                if lag >= 0:
                    lags[lag] = lags.get(lag, 0) + 1
            for lag, count in lags.items():
                metrics.trigger_lag.observe(lag / 1000, count)
                metrics.lag_window.add(lag / 1000, count)
        for job, count in self._missed.items():
            metrics.missed.labels(metrics.job_label(job)).inc(count)
            log.warning(
                "missed schedule: %d tick(s) past time + grace",
                count,
                extra={"job_id": job, "shard": self.shard, "epoch": self.epoch},
            )
        self._missed = {}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        keys = (
            self.keys.timer,
            self.keys.ready,
            self.keys.epoch,
            self.keys.stats,
            self.keys.retries,
        )
        head = [
            self.epoch,
            self.keys.base,
            self.batch,
            self._ready_channel,
            self.shard,
            LOOKAHEAD_MS,
        ]
        items: list[Any] = []
        task_status.started()
        delay = 0.05
        while True:
            if not items:
                self._woken = trio.Event()
            started = trio.current_time()
            try:
                missed = sum(self._missed.values()) if items else 0
                reply = await self.redis.script("fire", keys, [*head, missed, *items])
            except (RedisConnectionError, ReplyError) as exc:
                log.warning("shard %d: fire failed (%s); retrying in %.2fs", self.shard, exc, delay)
                await trio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue  # the same items again: the compare-and-set makes it idempotent
            delay = 0.05
            if reply[0] == -1:
                self.refused += 1
                raise LeaseLost(f"shard {self.shard}: epoch {self.epoch} superseded by {reply[1]}")
            now_ms, fired, next_ms = int(reply[1]), reply[2], reply[3]
            self.fired_total += fired
            if items:
                self._observe(now_ms, fired, trio.current_time() - started)
            due = reply[4:]
            if due:
                items = self._plan(due, now_ms)
                # Planned up to LOOKAHEAD_MS before their tick: fire as the last one falls due.
                ahead = max(int(float(due[i])) for i in range(1, len(due), 3)) - now_ms
                if ahead > 0:
                    await trio.sleep(ahead / 1000)
                continue
            items = []
            # Wake a little early: the due batch comes back planned, and fires on the tick.
            wait = (int(next_ms) - now_ms - LOOKAHEAD_MS) / 1000 if next_ms else MAX_IDLE_S
            with trio.move_on_after(min(max(wait, 0.0), MAX_IDLE_S)):
                await self._woken.wait()
