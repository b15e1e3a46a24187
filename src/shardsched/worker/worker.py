"""The worker: claims fired runs from the shard streams and executes them in slots.

A worker claims only as many runs as it has free slots, with ``lua/claim.lua`` (the
consumer-group read and the move to ``running`` are one atomic step). It learns which
shards have work from the ready channel (one pub/sub connection, whatever the shard
count), and looks at every shard once after each (re)subscription and every
``sweep_every_s`` as a safety net for a lost message. Outcomes are batched per shard into
``lua/complete.lua``, which refuses any completion the worker no longer holds the run for.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass

import msgspec
import trio

from shardsched.core.instants import from_ms
from shardsched.core.models import RetryPolicy
from shardsched.core.pacing import Backoff
from shardsched.core.retry import verdict
from shardsched.runtime.metrics import Metrics
from shardsched.store.deployment import Deployment
from shardsched.store.keys import CONSUMER_GROUP, dag_run_of, job_of_run
from shardsched.store.redis import Redis, RedisError
from shardsched.worker import handlers
from shardsched.worker.runner import Outcome, run_command

log = logging.getLogger(__name__)


class ExecSpec(msgspec.Struct):
    """What a worker needs of a job's spec; decoding only this skips the rest quickly."""

    command: str
    timeout_s: float = 3600.0
    lease_s: float = 30.0
    retry_policy: RetryPolicy = msgspec.field(default_factory=RetryPolicy)


_spec_decoder = msgspec.json.Decoder(ExecSpec)
#: Completions sent in one script call at most.
COMPLETE_BATCH = 500
#: Durations kept per job, and jobs kept, for the overrunning check.
RECENT_DURATIONS = 50
DURATION_JOBS = 10_000
OVERRUN_CHECK_S = 1.0
#: How often in-process handlers are checked against their timeout.
WATCHDOG_TICK_S = 0.1


def _decode_spec(raw: bytes) -> ExecSpec | None:
    try:
        return _spec_decoder.decode(raw)
    except msgspec.DecodeError:
        return None


def default_worker_id() -> str:
    return f"worker-{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Claimed:
    shard: int
    entry_id: str
    run_id: str
    spec: ExecSpec | None  #: None when the job's definition is gone or unreadable
    scheduled_for_ms: int
    attempt: int
    token: int
    claimed_ms: int  #: the server's clock at the claim
    claimed_local: float  #: trio's clock at the claim, to carry the server clock forward


class WorkerInfo(msgspec.Struct):
    """What a worker publishes in the registry (GET /api/v1/workers)."""

    capacity: int
    capacity_free: int
    running: int
    completed: int
    draining: bool
    started_ms: int
    overrunning: int = 0


@dataclass(frozen=True, slots=True)
class Finished:
    claimed: Claimed
    outcome: Outcome
    started_ms: int  #: execution start on the server's clock (estimated from the claim)


class Worker:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str | None = None,
        concurrency: int = 16,
        sweep_every_s: float = 5.0,
        drain_grace_s: float = 10.0,
        heartbeat_every_s: float = 2.0,
        metrics: Metrics | None = None,
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.worker_id = worker_id or default_worker_id()
        self.concurrency = concurrency
        self.sweep_every_s = sweep_every_s
        self.drain_grace_s = drain_grace_s
        self.heartbeat_every_s = heartbeat_every_s
        self.draining = trio.Event()
        self._registered_ms = 0
        self.free = concurrency
        self.completed = 0
        self.refused = 0
        self._maybe_ready: set[int] = set()
        self._changed = trio.Event()
        self._finished: list[Finished] = []
        self._completing: list[Finished] = []  #: the batch whose completion is in flight
        self._finished_added = trio.Event()
        self._running: dict[tuple[str, int], tuple[Claimed, trio.CancelScope]] = {}
        #: every delivery this worker holds, from its claim until its completion is applied
        #: or refused (running, or finished and waiting to be completed): a take-up after a
        #: reconnect must not start any of them again
        self._held: set[tuple[str, int]] = set()
        self._lost: set[tuple[str, int]] = set()  #: runs whose lease went elsewhere
        self._renew_every = 10.0
        self._renew_sooner = trio.Event()
        self._deadlines: dict[trio.CancelScope, float] = {}
        self.metrics = metrics or Metrics()
        self.metrics.running.set_function(lambda: len(self._running))
        #: recent durations (s) of each job's runs here, for "overrunning" (bounded)
        self._durations: OrderedDict[str, deque[float]] = OrderedDict()
        self.overrunning: dict[str, int] = {}

    def _poke(self) -> None:
        self._changed.set()

    def _mark_all(self) -> None:
        self._maybe_ready.update(range(self.dep.n_shards))
        self._poke()

    async def _listen(self, *, task_status: trio.TaskStatus[None]) -> None:
        started = False
        async for msg in self.redis.subscribe(self.dep.globals.ready_channel):
            if msg is None:
                await self._take_up_pending()
                self._mark_all()
                if not started:
                    task_status.started()
                    started = True
            else:
                self._maybe_ready.add(int(msg))
                self._poke()

    async def _take_up_pending(self) -> None:
        """After a (re)connect, first take up runs delivered to this worker id and never
        finished by it (a lost claim reply, a restart under the same id)."""
        sks = [self.dep.shard(s) for s in range(self.dep.n_shards)]
        calls = [
            ("pending_runs", (sk.ready,), (CONSUMER_GROUP, self.worker_id, sk.base, 1000))
            for sk in sks
        ]
        try:
            replies = await self.redis.scripts(calls)
        except RedisError as exc:
            self.metrics.redis_error(log, "taking up pending runs", exc, 0)
            return  # the next re-subscription tries again
        held_runs = {run_id for run_id, _ in self._held}
        for shard, reply in enumerate(replies):
            if isinstance(reply, Exception):
                continue
            for c in self._parse_claimed(shard, reply):
                if c.run_id in held_runs:
                    continue  # running here, or finished and its completion on the way
                log.warning("taking up run %s still pending on this worker", c.run_id)
                self._start(c)

    async def _sweep(self) -> None:
        while True:
            await trio.sleep(self.sweep_every_s)
            self._mark_all()

    async def _claim(self, shard: int, count: int) -> list[Claimed]:
        sk = self.dep.shard(shard)
        reply = await self.redis.script(
            "claim", (sk.ready,), (sk.base, CONSUMER_GROUP, self.worker_id, count)
        )
        return self._parse_claimed(shard, reply)

    def _parse_claimed(self, shard: int, reply: list) -> list[Claimed]:
        local = trio.current_time()
        lags: dict[int, int] = {}
        for i in range(0, len(reply), 8):
            if reply[i + 4] == b"1":  # a first attempt: claimable since its scheduled time
                lag = int(reply[i + 7]) - int(reply[i + 3])
                lags[lag] = lags.get(lag, 0) + 1
        for lag, count in lags.items():
            self.metrics.claim_latency.observe(max(lag, 0) / 1000, count)
        return [
            Claimed(
                shard=shard,
                entry_id=reply[i].decode(),
                run_id=reply[i + 1].decode(),
                spec=_decode_spec(reply[i + 2]),
                scheduled_for_ms=int(reply[i + 3]),
                attempt=int(reply[i + 4]),
                token=int(reply[i + 5]),
                claimed_ms=int(reply[i + 7]),
                claimed_local=local,
            )
            for i in range(0, len(reply), 8)
        ]

    def _started_ms(self, claimed: Claimed) -> int:
        return claimed.claimed_ms + round((trio.current_time() - claimed.claimed_local) * 1000)

    def _finish(self, claimed: Claimed, outcome: Outcome, started_ms: int) -> None:
        self._finished.append(Finished(claimed, outcome, started_ms))
        self._finished_added.set()

    def _start(self, claimed: Claimed) -> None:
        """Execute a claimed run: inline handlers right here, anything else in a task."""
        self._held.add((claimed.run_id, claimed.token))
        if claimed.spec is not None and handlers.is_inline(claimed.spec.command):
            self._execute_inline(claimed)
        else:
            self.free -= 1
            self._nursery.start_soon(self._execute, claimed)

    async def _execute(self, claimed: Claimed) -> None:
        started_ms = self._started_ms(claimed)
        key = (claimed.run_id, claimed.token)  # the same run may come back: a new delivery
        outcome: Outcome | None = None
        try:
            with trio.CancelScope() as scope:
                self._running[key] = (claimed, scope)
                if claimed.spec is not None and claimed.spec.lease_s / 3 < self._renew_every:
                    self._renew_sooner.set()
                outcome = await self._outcome(claimed)
        finally:
            del self._running[key]
            self.free += 1
            self._poke()
        if key in self._lost:  # the lease went elsewhere: the process group was killed
            self._lost.discard(key)
            self._held.discard(key)
            return
        if outcome is not None:
            self._finish(claimed, outcome, started_ms)
        else:
            self._held.discard(key)

    def _unacknowledged(self) -> list[Claimed]:
        """Finished runs whose completion is queued or on its way: their leases still count."""
        return [f.claimed for f in (*self._completing, *self._finished)]

    def _renew_interval(self) -> float:
        held = [c for c, _ in self._running.values()] + self._unacknowledged()
        leases = [c.spec.lease_s for c in held if c.spec is not None]
        return min(max(min(leases, default=30.0) / 3, 0.2), 10.0)

    async def _renewer(self) -> None:
        """Extend the leases of every running run, one script call per shard per round."""
        while True:
            self._renew_every = self._renew_interval()
            with trio.move_on_after(self._renew_every):
                await self._renew_sooner.wait()  # a run with a shorter lease started
                self._renew_sooner = trio.Event()
            if not self._running and not self._finished and not self._completing:
                continue
            by_shard: dict[int, list[Claimed]] = defaultdict(list)
            for claimed, _ in self._running.values():
                by_shard[claimed.shard].append(claimed)
            # Finished runs whose completion Redis has not taken yet (full, restarting) are
            # still ours: keep their leases, or the owner would deliver them again.
            for claimed in self._unacknowledged():
                by_shard[claimed.shard].append(claimed)
            calls = []
            for shard, runs in by_shard.items():
                sk = self.dep.shard(shard)
                args: list[object] = [CONSUMER_GROUP, self.worker_id, sk.base]
                for c in runs:
                    args += (c.entry_id, c.run_id, c.token)
                calls.append(("renew_runs", (sk.ready,), args))
            try:
                replies = await self.redis.scripts(calls)
            except RedisError as exc:
                self.metrics.redis_error(log, "lease renewal", exc, self._renew_every)
                continue
            for runs, reply in zip(by_shard.values(), replies, strict=True):
                if isinstance(reply, Exception):
                    self.metrics.redis_error(log, "lease renewal", reply, self._renew_every)
                    continue
                for c, code in zip(runs, reply[1::2], strict=True):
                    key = (c.run_id, c.token)
                    if code != 1 and key in self._running:
                        why = "cancelled" if code == -3 else "lost its lease"
                        log.warning("run %s %s: stopping it", c.run_id, why)
                        self._lost.add(key)
                        self._running[key][1].cancel()

    def _execute_inline(self, claimed: Claimed) -> None:
        """An inline handler: called right here, no task (see handlers)."""
        started_ms = self._started_ms(claimed)
        assert claimed.spec is not None
        fn = handlers.lookup(claimed.spec.command)
        assert fn is not None
        job_id = claimed.run_id.split(":", 1)[0]
        ctx = handlers.HandlerContext(
            claimed.run_id, job_id, claimed.attempt, claimed.scheduled_for_ms
        )
        try:
            fn(ctx)
            outcome = Outcome(0, None, b"")
        except Exception as exc:  # the job's own failure, not ours
            outcome = Outcome(None, f"handler error: {exc!r}"[:500], b"")
        self._finish(claimed, outcome, started_ms)

    async def _outcome(self, claimed: Claimed) -> Outcome:
        spec = claimed.spec
        if spec is None:
            return Outcome(None, "job definition missing", b"")
        job_id = claimed.run_id.split(":", 1)[0]
        try:
            fn = handlers.lookup(spec.command)
        except LookupError as exc:
            return Outcome(None, str(exc), b"")
        if fn is not None:
            ctx = handlers.HandlerContext(
                claimed.run_id, job_id, claimed.attempt, claimed.scheduled_for_ms
            )
            # A deadline per cancel scope costs trio a heap operation each way, a large share
            # of an instant handler; the watchdog enforces timeouts to within its tick.
            try:
                with trio.CancelScope() as scope:
                    self._deadlines[scope] = trio.current_time() + spec.timeout_s
                    try:
                        await handlers.call(fn, ctx)
                    finally:
                        del self._deadlines[scope]
            except Exception as exc:  # the job's own failure, not ours
                return Outcome(None, f"handler error: {exc!r}"[:500], b"")
            if scope.cancelled_caught:
                return Outcome(None, "timeout", b"")
            return Outcome(0, None, b"")
        env = {
            "SHARDSCHED_RUN_ID": claimed.run_id,
            "SHARDSCHED_JOB_ID": job_id,
            "SHARDSCHED_ATTEMPT": str(claimed.attempt),
            "SHARDSCHED_SCHEDULED_FOR": from_ms(claimed.scheduled_for_ms)
            .isoformat()
            .replace("+00:00", "Z"),
        }
        if drid := dag_run_of(claimed.run_id):
            env["SHARDSCHED_DAG_RUN_ID"] = drid
        return await run_command(spec.command, spec.timeout_s, env)

    async def _watchdog(self) -> None:
        """Cancel in-process handlers past their timeout (to within WATCHDOG_TICK_S)."""
        while True:
            await trio.sleep(WATCHDOG_TICK_S)
            now = trio.current_time()
            for scope, deadline in list(self._deadlines.items()):
                if deadline <= now:
                    scope.cancel()

    async def _completer(self) -> None:
        """Send finished runs back in batches: one script call per shard per round trip.

        An outcome is kept until its completion is applied or refused as stale: whatever
        Redis could not take (connection lost, an error reply such as OOM) goes back to
        the front of the queue and is sent again after a pause (complete.lua answers 0 to
        a replay of what it already applied)."""
        backoff = Backoff(cap=5.0)
        while True:
            if not self._finished:
                await self._finished_added.wait()
                self._finished_added = trio.Event()
                continue
            batch = self._completing = self._finished[:COMPLETE_BATCH]
            del self._finished[:COMPLETE_BATCH]
            try:
                again = await self._complete(batch)
            finally:
                self._completing = []
            if again:
                self._finished[:0] = again
                await trio.sleep(backoff.next())
            else:
                backoff.reset()

    def _verdict(self, f: Finished) -> tuple[str, int | str]:
        policy = f.claimed.spec.retry_policy if f.claimed.spec else RetryPolicy()
        now_ms = self._started_ms(f.claimed)  # the server's clock, carried forward
        return verdict(f.outcome.succeeded, f.claimed.attempt, policy, now_ms)

    async def _complete(self, batch: list[Finished]) -> list[Finished]:
        """Complete a batch; returns the runs whose completion must be sent again."""
        by_shard: dict[int, list[Finished]] = defaultdict(list)
        for f in batch:
            by_shard[f.claimed.shard].append(f)
        calls = []
        states: dict[str, str] = {}
        for shard, items in by_shard.items():
            sk = self.dep.shard(shard)
            args: list[object] = [
                CONSUMER_GROUP,
                self.worker_id,
                sk.base,
                self.dep.globals.wake_channel,
                shard,
                self.dep.globals.ready_channel,
            ]
            for f in items:
                o = f.outcome
                state, retry_at = self._verdict(f)
                states[f.claimed.run_id] = state
                args += (
                    f.claimed.entry_id,
                    f.claimed.run_id,
                    f.claimed.token,
                    state,
                    "" if o.exit_code is None else o.exit_code,
                    o.reason or "",
                    o.output,
                    f.started_ms,
                    retry_at,
                )
            calls.append(("complete", (sk.ready, sk.retries, sk.dead_letter), args))
        try:
            started = trio.current_time()
            replies = await self.redis.scripts(calls)
            self.metrics.ledger_write.labels("complete").observe(trio.current_time() - started)
        except RedisError as exc:  # idempotent: a replay answers 0
            self.metrics.redis_error(log, f"completing {len(batch)} runs", exc, 0)
            return batch
        again: list[Finished] = []
        for items, reply in zip(by_shard.values(), replies, strict=True):
            if isinstance(reply, Exception):
                self.metrics.redis_error(log, f"completing {len(items)} runs", reply, 0)
                again += items
                continue
            now_ms = int(reply[0])
            for f, code in zip(items, reply[1:], strict=True):
                self._held.discard((f.claimed.run_id, f.claimed.token))
                if code in (0, 1):
                    self.completed += 1
                    if code == 1:
                        self._record(f, states[f.claimed.run_id], now_ms)
                else:
                    self.refused += 1
                    log.warning(
                        "completion of %s refused (code %s)",
                        f.claimed.run_id,
                        code,
                        extra={"run_id": f.claimed.run_id, "shard": f.claimed.shard},
                    )
        return again

    def _record(self, f: Finished, state: str, now_ms: int) -> None:
        """Metrics of one applied completion; its duration joins its job's recent ones."""
        job_id = job_of_run(f.claimed.run_id)
        self.metrics.runs_finished.labels(state).inc()
        if state == "dead_letter" or log.isEnabledFor(logging.DEBUG):
            fields = {
                "run_id": f.claimed.run_id,
                "job_id": job_id,
                "shard": f.claimed.shard,
                "worker_id": self.worker_id,
                "dag_run_id": dag_run_of(f.claimed.run_id),
            }
            if state == "dead_letter":
                self.metrics.dead_letters.labels(self.metrics.job_label(job_id)).inc()
                log.warning("run dead-lettered: %s", f.outcome.reason or "failed", extra=fields)
            else:
                log.debug("run %s", state, extra=fields)
        recent = self._durations.get(job_id)
        if recent is None:
            recent = self._durations[job_id] = deque(maxlen=RECENT_DURATIONS)
            if len(self._durations) > DURATION_JOBS:
                self._durations.popitem(last=False)
        else:
            self._durations.move_to_end(job_id)
        recent.append(max(now_ms - f.started_ms, 0) / 1000)

    def _p99(self, job_id: str) -> float | None:
        """The job's recent p99 duration here, once 5 runs are known."""
        recent = self._durations.get(job_id)
        if recent is None or len(recent) < 5:
            return None
        ordered = sorted(recent)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]

    def _overrun_threshold(self, claimed: Claimed) -> float:
        """Seconds after which a run of this job is overrunning: 2x its recent p99 (from
        5 runs on; never under 1 s), or 90 % of its timeout, whichever comes first."""
        limit = math.inf
        if claimed.spec is not None:
            limit = 0.9 * claimed.spec.timeout_s
        p99 = self._p99(job_of_run(claimed.run_id))
        if p99 is not None:
            limit = min(limit, max(2 * p99, 1.0))
        return limit

    async def _watch_overruns(self) -> None:
        """Every second: which running runs overrun (a gauge per job, and the registry)."""
        gauge = self.metrics.overrunning
        while True:
            await trio.sleep(OVERRUN_CHECK_S)
            now = trio.current_time()
            counts: dict[str, int] = {}
            ratios: dict[str, float] = {}
            for claimed, _scope in list(self._running.values()):
                elapsed = now - claimed.claimed_local
                if elapsed > self._overrun_threshold(claimed):
                    job_id = job_of_run(claimed.run_id)
                    counts[job_id] = counts.get(job_id, 0) + 1
                    p99 = self._p99(job_id)
                    if p99:
                        ratios[job_id] = max(ratios.get(job_id, 0.0), elapsed / p99)
            for job_id in set(self.overrunning) - set(counts):
                gauge.labels(self.metrics.job_label(job_id)).set(0)
                self.metrics.overrun_ratio.labels(self.metrics.job_label(job_id)).set(0)
            for job_id, count in counts.items():
                if job_id not in self.overrunning:
                    log.warning("job %s overrunning", job_id, extra={"job_id": job_id})
                gauge.labels(self.metrics.job_label(job_id)).set(count)
                self.metrics.overrun_ratio.labels(self.metrics.job_label(job_id)).set(
                    ratios.get(job_id, 0.0)
                )
            self.overrunning = counts

    def drain(self) -> None:
        """Stop claiming, let running runs finish within the grace, hand back the rest."""
        self.draining.set()
        self._poke()

    async def _heartbeat_once(self) -> None:
        g = self.dep.globals
        info = msgspec.json.encode(
            WorkerInfo(
                capacity=self.concurrency,
                capacity_free=self.free,
                running=len(self._running),
                completed=self.completed,
                draining=self.draining.is_set(),
                started_ms=self._registered_ms,
                overrunning=sum(self.overrunning.values()),
            )
        )
        ttl = round(self.heartbeat_every_s * 3000)
        reply = await self.redis.script(
            "heartbeat", (g.workers, g.worker_info), (self.worker_id, ttl, info)
        )
        if not self._registered_ms:
            self._registered_ms = int(reply[0])

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self._heartbeat_once()
            except RedisError as exc:
                self.metrics.redis_error(log, "worker heartbeat", exc, self.heartbeat_every_s)
            await trio.sleep(self.heartbeat_every_s)

    async def _hand_back(self) -> None:
        """Kill what still runs after the grace and give those runs back at once."""
        held = list(self._running.values())
        for claimed, scope in held:
            self._lost.add((claimed.run_id, claimed.token))
            scope.cancel()
        by_shard: dict[int, list[Claimed]] = defaultdict(list)
        for claimed, _ in held:
            by_shard[claimed.shard].append(claimed)
        calls = []
        for shard, runs in by_shard.items():
            sk = self.dep.shard(shard)
            args: list[object] = [
                CONSUMER_GROUP,
                self.worker_id,
                sk.base,
                self.dep.globals.ready_channel,
                shard,
            ]
            for c in runs:
                args += (c.entry_id, c.run_id, c.token)
            calls.append(("release_runs", (sk.ready,), args))
        if calls:
            try:
                released = await self.redis.scripts(calls)
            except RedisError as exc:  # their leases lapse and the owner reclaims them
                self.metrics.redis_error(log, "drain: handing back runs", exc, 0)
                return
            log.warning(
                "drain: handed back %s runs", sum(r for r in released if isinstance(r, int))
            )

    async def _drain_and_leave(self) -> None:
        with trio.move_on_after(self.drain_grace_s):
            while self._running:
                await self._changed.wait()
                self._changed = trio.Event()
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await self._hand_back()
            backoff = Backoff(cap=1.0)
            while self._finished:  # completions of what did finish (until the 10 s are up)
                batch = self._finished[:COMPLETE_BATCH]
                del self._finished[:COMPLETE_BATCH]
                again = await self._complete(batch)
                if again:
                    self._finished[:0] = again
                    await trio.sleep(backoff.next())
            g = self.dep.globals
            try:
                await self.redis.pipeline(
                    [("ZREM", g.workers, self.worker_id), ("HDEL", g.worker_info, self.worker_id)]
                )
            except RedisError:
                pass  # the registration lapses by itself

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._listen, name="ready-listener")
            nursery.start_soon(self._sweep, name="sweep")
            nursery.start_soon(self._completer, name="completer")
            nursery.start_soon(self._watchdog, name="handler-watchdog")
            nursery.start_soon(self._renewer, name="lease-renewer")
            nursery.start_soon(self._watch_overruns, name="overrun-watch")
            try:
                await self._heartbeat_once()  # registered when ready, if Redis lets us
            except RedisError as exc:
                self.metrics.redis_error(log, "worker heartbeat", exc, self.heartbeat_every_s)
            nursery.start_soon(self._heartbeat, name="heartbeat")
            task_status.started()
            backoff = Backoff()
            while True:
                if self.draining.is_set():
                    await self._drain_and_leave()
                    nursery.cancel_scope.cancel()
                    return
                if self.free == 0 or not self._maybe_ready:
                    await self._changed.wait()
                    self._changed = trio.Event()
                    continue
                shard = self._maybe_ready.pop()
                want = self.free
                try:
                    claimed = await self._claim(shard, want)
                except RedisError as exc:
                    pause = backoff.next()
                    self.metrics.redis_error(log, f"claim on shard {shard}", exc, pause)
                    self._maybe_ready.add(shard)
                    await trio.sleep(pause)
                    continue
                backoff.reset()
                if len(claimed) == want:
                    self._maybe_ready.add(shard)  # there may be more
                for c in claimed:
                    self._start(c)
