"""The shard actor: one trio task per owned shard, firing its timer exactly once per tick.

The actor holds no state that matters across a crash: the timer ZSET is the durable record
of what should fire (ARCHITECTURE.md). Each loop is one call of ``lua/fire.lua``, which fires the
batch computed from the previous answer and reports the next due batch, so a burst costs
one round trip per batch. Between bursts it sleeps until the earliest timer entry is due
on the Redis server's clock, or until woken because a job of the shard changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import trio

from shardsched.core.catchup import decide, on_calendar
from shardsched.core.models import Overlap
from shardsched.core.pacing import Backoff
from shardsched.core.queues import parse_stored
from shardsched.core.schedule import NextFireMemo
from shardsched.runtime.metrics import Metrics
from shardsched.runtime.tracing import RunTracer
from shardsched.shard.accounting import BatchAccount
from shardsched.shard.calendar_book import CalendarBook
from shardsched.shard.fire_spans import FireSpans
from shardsched.shard.missed import MissedTicks
from shardsched.shard.paced import hand_over, paced_catch_up
from shardsched.shard.queue_backlogs import QueueBacklogs
from shardsched.shard.waker import fire_and_wake
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.lua import firing
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)


#: How far ahead of its tick a due batch is read and planned (the fire script never fires
#: an item before its tick): planning then overlaps the wait instead of adding to the lag.
LOOKAHEAD_MS = 300

#: Longest sleep without a look at the timer: a safety net for a lost wake message only.
MAX_IDLE_S = 30.0

#: At most this long making fire spans while waiting for a tick (shard/fire_spans.py).
SPANS_SLICE_S = 0.001


#: Due entries whose ticks are this close (ms) fire in one call.
SAME_TICK_MS = 2


class _Planned(NamedTuple):
    """One due job, planned: its fire script item, and what the metrics need of it."""

    item: firing.FireItem
    due: int  #: its timer score: the fire script applies it from then on
    fire: int | None  #: when the tick it fires was planned for, if any (its lag's zero)
    late: int  #: ticks found past their time plus the misfire grace
    raw: Any  #: the timing JSON it was planned from
    team: str = ""  #: its team label (shard/accounting.py)
    fire_late: bool = False  #: the tick it fires is past its misfire grace
    owed: Any = None  #: catchup paced: the backfill call of its owed ticks, made first


def _text(job: bytes | str) -> str:
    return job.decode() if isinstance(job, bytes) else job


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
        wake: Callable[[int, tuple[str, ...]], None] | None = None,
        tracer: RunTracer | None = None,
        calendars: CalendarBook | None = None,
        queue_backlogs: QueueBacklogs | None = None,
    ) -> None:
        #: each queue's default backpressure, for jobs with none of their own
        self.queue_backlogs = queue_backlogs
        #: the node's named calendars, which calendar ticks are decided with
        self.calendars = calendars
        #: the fire spans made while idle (None: tracing is off, runtime/tracing.py)
        self.spans = None if tracer is None else FireSpans(tracer, shard)
        self.redis = redis
        self.keys = dep.shard(shard)
        self.shard = shard
        self.epoch = epoch
        self.memo = memo
        self.batch = batch
        self.fired_total = 0
        self.refused = 0
        #: pushes a wake token for this shard and each queue whose ready stream got runs
        self._wake = wake or (lambda shard, queues: None)
        self._g = dep.globals if wake is not None else None  #: its fire calls push tokens
        self._woken = trio.Event()
        #: a job of this shard changed since the last call that read the due jobs: the
        #: next call reads them again (a call firing kept plans reads none otherwise)
        self._changed = True
        self.metrics = metrics or Metrics()
        self._fires: list[int] = []  #: ticks the planned batch fires (for the lag histogram)
        self._missed: dict[str, int] = {}  #: job -> ticks found past time + misfire grace
        self._skips: dict[str, int] = {}  #: reason -> ticks the planned batch skips
        self._account = BatchAccount()  #: the planned batch's ticks by team
        self._taken: list[_Planned] = []  #: the plans of the items the fire call sends
        #: catchup paced: backfill calls of owed ticks, made before the fire call
        self._owed: list[Call] = []
        #: ticks found missed, told (counted, logged, an event), labels read sparingly
        self._missed_ticks = MissedTicks(redis, self.keys, shard, self.metrics)
        #: (job, score, timing) -> its plan, for due jobs planned but not yet fired
        self._kept: dict[tuple[Any, int, Any, Any], _Planned] = {}
        #: (job, planned timer score, reason) of jobs the last planning could not plan
        self._quarantine: list[tuple[Any, int, str]] = []

    def wake(self) -> None:
        """Look at the timer again now (a job of this shard was added or changed)."""
        self._changed = True
        self._woken.set()

    def _plan(self, due: Sequence[firing.Due], now_ms: int) -> list[_Planned]:
        """The fire script's items for a due batch, each with its tick: pure computation,
        no I/O. A job planned in the last batch and still due as it was (same score, same
        timing) keeps that plan."""
        planned: list[_Planned] = []
        memo = self.memo
        kept = self._kept
        for job, old, raw, queue in due:
            again = kept.get((job, old, raw, queue))
            if again is not None:
                planned.append(again)
                continue
            if not raw:  # the job hash vanished under its timer entry: drop the entry
                planned.append(_Planned(firing.drop(job, old), old, None, 0, raw))
                continue
            overlap = Overlap.ALLOW
            grace_ms = 60_000
            try:
                timing = memo.timing(raw)
                overlap = timing.overlap
                grace_ms = round(timing.misfire_grace_s * 1000)
                # With a spread, the timer holds planned times: decide on the nominal
                # clock (the job's ticks, and now, less its offset), then plan it back.
                off = memo.offset(job, timing.spread_s) if timing.spread_s else 0
                decision = decide(timing, old - off, now_ms - off, partial(memo.next_after, raw))
                if timing.calendars is not None:
                    book = self.calendars.calendars if self.calendars else {}
                    decision = on_calendar(decision, timing, book)
            except Exception as exc:  # whatever it is, it must not stop the shard
                # Neither fired blindly nor dropped: paused with the reason (quarantine.lua).
                self._quarantine.append((job, old, f"{type(exc).__name__}: {exc}"[:400]))
                continue
            cutoff, late = now_ms - off - grace_ms, 0
            fire_late = decision.fire is not None and decision.fire < cutoff
            late += fire_late
            if decision.skip is not None and decision.skip.first < cutoff:
                late += decision.skip.count
            skip = None if decision.skip is None else decision.skip.encode()
            new = None if decision.new is None else decision.new + off
            fallback = ""  # the queue's default backpressure, unless the job has its own
            if not timing.backlog and self.queue_backlogs and self.queue_backlogs.codes:
                name = parse_stored(queue.decode() if isinstance(queue, bytes) else queue)[0]
                fallback = self.queue_backlogs.codes.get(name, "")
            item = firing.plan(
                job, old, decision.fire, new, skip, overlap, queue, off, timing, fallback
            )
            fire = None if decision.fire is None else decision.fire + off  # lag: vs planned
            owed = None
            if decision.owed is not None:
                owed = paced_catch_up(self.keys, job, timing, decision.owed, raw, memo)
            planned.append(_Planned(item, old, fire, late, raw, timing.team, fire_late, owed))
        return planned

    def _take(self, planned: list[_Planned]) -> tuple[list[firing.FireItem], int]:
        """The items to fire as the earliest planned tick falls due: those due with it (a
        boundary's whole burst shares one tick). The later ones are kept planned: the fire
        script reports them due again, and they fire on their own ticks, not all at the
        last one. Returns (items, the tick to fire them at)."""
        first = min(p.due for p in planned)
        now_items: list[firing.FireItem] = []
        fires = self._fires = []
        missed = self._missed = {}
        skips = self._skips = {}
        account = self._account = BatchAccount()
        taken = self._taken = []
        self._kept = {}
        for p in planned:
            job = p.item.job
            if p.due > first + SAME_TICK_MS:
                self._kept[(job, p.due, p.raw, p.item.queue)] = p
                continue
            now_items.append(p.item)
            taken.append(p)
            if p.owed is not None:
                self._owed.append(p.owed)
            if p.fire is not None:
                fires.append(p.fire)
            if p.late:
                missed[job.decode() if isinstance(job, bytes) else job] = p.late
            skip = str(p.item.skip) if p.item.skip else None  # "first:last:count:reason"
            if skip:
                _, _, count, reason = skip.split(":", 3)
                skips[reason] = skips.get(reason, 0) + int(count)
            account.planned(p.team, p.fire is not None, p.fire_late, skip)
        return now_items, first

    async def _apply_quarantines(self) -> None:
        """Pause the jobs the planning could not plan, with the reason (fenced, idempotent:
        a job changed meanwhile is planned afresh). Retried with the next due batch on a
        Redis error, since the job then stays due."""
        held, self._quarantine = self._quarantine, []
        calls = []
        for job, old, reason in held:
            job_id = job.decode() if isinstance(job, bytes) else job
            calls.append(jobs_lua.quarantine(self.keys, self.epoch, job_id, old, reason))
        try:
            replies = await redis_calls(self.redis, calls)
        except RedisError as exc:
            self.metrics.redis_error(log, f"shard {self.shard}: quarantine", exc, 0)
            return
        for (job, _old, reason), reply in zip(held, replies, strict=True):
            job_id = job.decode() if isinstance(job, bytes) else job
            if reply == jobs_lua.Quarantined.QUARANTINED:
                self.metrics.quarantined.inc()
                log.error(
                    "job quarantined (paused): it cannot be planned: %s",
                    reason,
                    extra={"job_id": job_id, "shard": self.shard, "epoch": self.epoch},
                )
            elif reply == jobs_lua.Quarantined.STALE_EPOCH:
                self.refused += 1
                raise LeaseLost(f"shard {self.shard}: epoch {self.epoch} superseded")
            elif isinstance(reply, Exception):
                self.metrics.redis_error(log, f"shard {self.shard}: quarantine", reply, 0)

    def _observe(self, now_ms: int, reply: firing.Fired, took_s: float) -> dict[str, int]:
        """Metrics of one applied batch: lags by distinct value and write time, skips by
        reason, ticks by team; returns the ticks found missed, by job (reported by
        :class:`~shardsched.shard.missed.MissedTicks`)."""
        metrics, fired = self.metrics, reply.fired
        if reply.overlapped:  # held back by fire.lua's overlap policy (rare: looked up)
            team_of = {_text(p.item.job): p.team for p in self._taken}
            for job, reason in reply.overlapped:
                self._skips[reason] = self._skips.get(reason, 0) + 1
                self._account.overlapped(team_of.get(job, ""), reason)
        self._account.flush(metrics)
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
        for reason, count in self._skips.items():
            metrics.ticks_skipped.labels(reason).inc(count)
        self._skips = {}
        missed, self._missed = self._missed, {}
        return missed

    async def _until_tick(self, ahead_ms: int) -> None:
        """Wait ``ahead_ms`` for the next planned tick, making noted fire spans for at most
        half of it and SPANS_SLICE_S: an owner whose shard always has a tick within
        LOOKAHEAD_MS is never idle, and made none before (a steady 830 firings/s exported
        12 - 20 % of them); the slice keeps the other shards' ticks, on this thread too,
        on time."""
        ahead_s = ahead_ms / 1000
        if ahead_s <= 0:
            return
        if self.spans is not None and self.spans.backlog:
            began = trio.current_time()
            self.spans.emit(min(ahead_s / 2, SPANS_SLICE_S))
            ahead_s -= trio.current_time() - began
        await trio.sleep(max(ahead_s, 0.0))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        items: list[firing.FireItem] = []
        task_status.started()
        backoff = Backoff()
        while True:
            if not items:
                self._woken = trio.Event()
            started = trio.current_time()
            try:
                if self._owed:  # first: a crash after it finds them queued, not lost
                    await hand_over(self.redis, self._owed)
                    self._owed = []
                missed = sum(self._missed.values()) if items else 0
                # Firing kept plans, with nothing changed since they were read: the call
                # reads no due jobs (it would read the kept ones again), only the
                # earliest score, which says whether anything came before them.
                report = not (items and self._kept and not self._changed)
                if report:
                    self._changed = False
                call = firing.fire(
                    self.keys,
                    epoch=self.epoch,
                    count=self.batch if report else 0,
                    lookahead_ms=LOOKAHEAD_MS,
                    missed=missed,
                    items=items,
                )
                reply, pushed = await fire_and_wake(self.redis, self._g, self.shard, call, items)
                fired = firing.decode_fired(reply)
            except RedisError as exc:
                pause = backoff.next()
                self.metrics.redis_error(log, f"shard {self.shard}: fire", exc, pause)
                await trio.sleep(pause)
                continue  # the same items again: the compare-and-set makes it idempotent
            backoff.reset()
            if isinstance(fired, int):
                self.refused += 1
                raise LeaseLost(f"shard {self.shard}: epoch {self.epoch} superseded by {fired}")
            now_ms, next_ms = fired.now_ms, fired.next_ms
            woken = tuple(q for q in fired.queues if q or not pushed)  # '' may have gone
            if (fired.fired or fired.retried) and woken:
                self._wake(self.shard, woken)
            self.fired_total += fired.fired
            if items and self.spans is not None:
                took_ms = round((trio.current_time() - started) * 1000)
                self.spans.note(items, self.epoch, now_ms - took_ms, now_ms)
            if items:
                missed_now = self._observe(now_ms, fired, trio.current_time() - started)
                if missed_now:
                    await self._missed_ticks.report(self.epoch, missed_now)
            due = fired.due
            if not report:
                kept_first = min(p.due for p in self._kept.values())
                if next_ms is not None and next_ms >= kept_first:
                    items, first = self._take(list(self._kept.values()))
                    await self._until_tick(first - now_ms)
                    continue
                items = []  # something is due before the kept plans: read them all again
                continue
            if due:
                planned = self._plan(due, now_ms)
                if self._quarantine:
                    await self._apply_quarantines()
                if not planned:  # all quarantined: look again
                    items = []
                    continue
                # Planned up to LOOKAHEAD_MS before their tick: fire each as it falls due.
                items, first = self._take(planned)
                await self._until_tick(first - now_ms)
                continue
            items = []
            self._kept = {}
            # Wake a little early: the due batch comes back planned, and fires on the tick.
            wait = (next_ms - now_ms - LOOKAHEAD_MS) / 1000 if next_ms else MAX_IDLE_S
            if self.spans is not None and self.spans.backlog:
                emitted = trio.current_time()  # half the idle time at most, then a look
                self.spans.emit(min(max(wait, 0.0), MAX_IDLE_S) / 2)
                wait -= trio.current_time() - emitted
            with trio.move_on_after(min(max(wait, 0.0), MAX_IDLE_S)):
                await self._woken.wait()
