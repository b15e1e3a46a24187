"""The worker: claims fired runs from the shard streams and executes them in slots.

A worker claims only as many runs as it has free slots, with ``lua/claim.lua`` (the
consumer-group read and the move to ``running`` are one atomic step). While it has a free
slot and no shard to look at, it waits for a wake token (``BLPOP``, store/ready.py): Redis
hands each token to one waiting worker, so a firing costs the same whatever the size of the
fleet. It looks at every shard once at start and after its waiting connection is lost
(and every ``sweep_every_s``, when set). The parts it composes, each a module: what it
holds (:mod:`.holdings`), running a run (:mod:`.execution`), keeping leases
(:mod:`.leases`), sending outcomes (:mod:`.completion`), noticing overruns (:mod:`.overruns`),
its entry in the registry of workers (:mod:`.registration`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence

import trio

from shardsched.core.pacing import Backoff
from shardsched.core.queues import DEFAULT_QUEUE
from shardsched.runtime import trace_context
from shardsched.runtime.metrics import Metrics
from shardsched.runtime.tracing import RunTracer
from shardsched.store import ready
from shardsched.store.deployment import Deployment
from shardsched.store.drive import call_script
from shardsched.store.lua import runs as lua
from shardsched.store.records import WorkerInfo
from shardsched.store.redis import Redis, RedisError, RedisNotDurable, blocking_pop
from shardsched.store.token_pusher import TokenPusher
from shardsched.worker import spans
from shardsched.worker.completion import Completer
from shardsched.worker.execution import Executor
from shardsched.worker.handback import hand_back
from shardsched.worker.holdings import Claimed, Finished, Holdings, State
from shardsched.worker.leases import LeaseRenewer
from shardsched.worker.limits import KeyLimits
from shardsched.worker.live_output import OutputFlusher
from shardsched.worker.overruns import OverrunTracker
from shardsched.worker.registration import Registration
from shardsched.worker.sandbox import CommandPolicy, Sandbox
from shardsched.worker.streams import Streams
from shardsched.worker.take_up import take_up

log = logging.getLogger(__name__)


def default_worker_id() -> str:
    return f"worker-{socket.gethostname()}-{os.getpid()}"


class Worker:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str | None = None,
        concurrency: int = 16,
        sweep_every_s: float | None = None,
        drain_grace_s: float = 10.0,
        heartbeat_every_s: float = 2.0,
        metrics: Metrics | None = None,
        pass_env: Sequence[str] = (),
        sandbox: Sandbox | None = None,
        policy: CommandPolicy | None = None,
        output_quota: lua.OutputQuota | None = None,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        tracer: RunTracer | None = None,
    ) -> None:
        self.redis = redis
        self.tracer = tracer  #: None: tracing is off (runtime/tracing.py)
        #: the queues it serves, in the order it claims them (names: core/queues.py)
        self.queues = tuple(queues)
        self.streams = Streams(self.queues)
        self.dep = dep
        self.worker_id = worker_id or default_worker_id()
        self.concurrency = concurrency
        self.sweep_every_s = sweep_every_s
        self.drain_grace_s = drain_grace_s
        self.heartbeat_every_s = heartbeat_every_s
        self.draining = trio.Event()
        self.free = concurrency
        self._owe_take_up = False  #: a claim ran but was not known durable (_claim_loop)
        self._taking_up = trio.Lock()
        self._maybe_ready: set[int] = set()
        self._changed = trio.Event()
        self._idle = trio.Event()  #: set while a slot is free and no shard is known to have work
        #: shards marked by a token, not yet claimed from -> the token's queue (as stored)
        self._from_token: dict[int, str] = {}
        #: passes a token on after a full first claim (other idle workers may take the rest)
        self._pusher = TokenPusher(
            redis,
            dep.globals,
            lambda exc, pause: self.metrics.redis_error(log, "passing a token on", exc, pause),
        )
        self.metrics = metrics or Metrics()
        self.holdings = Holdings()
        self.metrics.running.set_function(lambda: self.holdings.running_count)
        quota = output_quota or lua.OutputQuota.of(
            lua.DEFAULT_JOB_OUTPUT_QUOTA, lua.DEFAULT_OUTPUT_QUOTA, dep.n_shards
        )
        self.executor = Executor(pass_env, sandbox, policy, quota.run)
        self.overruns = OverrunTracker(self.holdings, self.metrics, redis, dep, self.worker_id)
        self.limits = KeyLimits(
            redis, dep, self.worker_id, self.holdings, self.metrics, self._released
        )
        self.holdings.on_leave = self.limits.left
        self.renewer = LeaseRenewer(
            redis, dep, self.worker_id, self.holdings, self.metrics, self.limits.renew, tracer
        )
        self.flusher = OutputFlusher(
            redis, dep, self.worker_id, self.holdings, self.metrics, quota=quota
        )
        self.completer = Completer(
            redis,
            dep,
            self.worker_id,
            self.holdings,
            self.overruns,
            self.metrics,
            self._released,
            quota,
            tracer,
        )
        self.registration = Registration(
            redis,
            dep,
            self.worker_id,
            heartbeat_every_s,
            self.metrics,
            self._info,
            self._learn_bands,
        )

    @property
    def completed(self) -> int:
        return self.completer.completed

    @property
    def refused(self) -> int:
        return self.completer.refused

    def _poke(self) -> None:
        self._changed.set()

    def _released(self, shard: int, queues: tuple[str, ...]) -> None:
        """A completion of ours put runs on ``shard``'s streams of ``queues``: claim those
        of our queues here if a slot is free (as if a token came, so a full claim passes
        one on), and wake a worker of each other queue."""
        self.streams.learn(queues)
        others = tuple(q for q in queues if q not in self.streams.all)
        ours = [q for q in queues if q in self.streams.all]
        if ours and self.free > 0 and not self.draining.is_set():
            self._from_token[shard] = ours[0]
            self._maybe_ready.add(shard)
            self._poke()
        else:
            others = queues
        if others:
            self._pusher.wake(shard, others)

    async def _learn_bands(self) -> None:
        await self.streams.refresh(self.redis, self.dep, self.metrics)

    def _mark_all(self) -> None:
        self._maybe_ready.update(range(self.dep.n_shards))
        self._poke()

    async def _wait_for_work(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Look at every shard once, then pop a wake token whenever idle."""
        await self._learn_bands()
        await self._take_up_pending()
        self._mark_all()
        task_status.started()
        g = self.dep.globals
        lists = {g.ready_tokens_of(q): q for q in self.streams.all}
        waiter = blocking_pop(self.redis, *lists)
        seen = 1
        backoff = Backoff()
        try:
            while True:
                await self._idle.wait()
                try:
                    token = await waiter.pop(ready.IDLE_WAIT_S)
                except RedisError as exc:
                    pause = backoff.next()
                    self.metrics.redis_error(log, "waiting for work", exc, pause)
                    await trio.sleep(pause)
                    continue
                backoff.reset()
                if waiter.connects > seen:  # a new connection: a token may have been lost
                    seen = waiter.connects
                    await self._learn_bands()
                    await self._take_up_pending()
                    self._mark_all()
                if token is not None:
                    key, value = token
                    shard = int(value)
                    self._from_token[shard] = lists.get(key, "")
                    self.streams.learn((self._from_token[shard],))
                    self._maybe_ready.add(shard)
                    self._idle = trio.Event()
                    self._poke()
        finally:
            with trio.CancelScope(shield=True):
                await waiter.aclose()

    async def _take_up_pending(self) -> bool:
        """After a (re)connect, first take up runs delivered to this worker id and never
        finished by it (worker/take_up.py); whether it could look."""
        async with self._taking_up:  # one at a time: two would both start a run
            return await take_up(
                self.redis, self.dep, self.worker_id, self.streams.all,
                self.holdings.run_ids, self.limits.admit, self._start_again,
                lambda exc: self.metrics.redis_error(log, "taking up pending runs", exc, 0),
            )  # fmt: skip

    def _start_again(self, claimed: Claimed) -> None:
        """Execute a run taken up (its earlier execution here died with its process): its
        trace noted as a redelivery's, kept like one (core/trace_keep)."""
        if self.tracer is not None:
            claimed = claimed._replace(trace=spans.noted(self.tracer, claimed.run_id, again=True))
        self._start(claimed)

    async def _sweep(self, every_s: float) -> None:
        while True:
            await trio.sleep(every_s)
            self._mark_all()

    async def _claim(self, shard: int, count: int) -> list[Claimed]:
        plan = self.streams.plan(count, shard)
        call = lua.claim(self.dep.shard(shard), self.dep.globals, self.worker_id, count, plan)
        started = trio.current_time()
        claimed = self._claimed(shard, await call_script(self.redis, call), started)
        self.streams.took(shard, len(claimed))
        return claimed

    def _claimed(self, shard: int, reply: list[object], started: float) -> list[Claimed]:
        local = trio.current_time()
        entries = lua.decode_claimed(reply)
        lags: dict[int, int] = {}
        for e in entries:
            if e.attempt == 1:  # a first attempt: claimable since its scheduled time
                lag = e.now_ms - e.scheduled_ms
                lags[lag] = lags.get(lag, 0) + 1
        for lag, count in lags.items():
            self.metrics.claim_latency.observe(max(lag, 0) / 1000, count)
        if self.tracer is not None:  # each run's spans noted, and its claim call's time
            took_ms, tracer = round((local - started) * 1000), self.tracer
            return [
                Claimed.of(shard, e, local, took_ms, spans.noted(tracer, e.run_id)) for e in entries
            ]
        return [Claimed.of(shard, e, local) for e in entries]

    def _start(self, claimed: Claimed) -> None:
        """Execute a claimed run: inline handlers right here, anything else in a task."""
        self.holdings.claim(claimed)
        if self.executor.is_inline(claimed):
            started_ms = claimed.server_ms()
            if self.tracer is None:  # the burst's path: not even a context manager
                outcome = self.executor.run_inline(claimed)
            else:
                with trace_context.current(spans.start(self.tracer, claimed)):
                    outcome = self.executor.run_inline(claimed)
                spans.end(self.tracer, claimed, started_ms, outcome, claimed.server_ms())
            self.holdings.finish(Finished(claimed, outcome, started_ms, inline=True))
        else:
            self.free -= 1
            self._nursery.start_soon(self._execute, claimed)

    async def _execute(self, claimed: Claimed) -> None:
        started_ms = claimed.server_ms()
        key, h = claimed.key, self.holdings
        outcome = None
        context = spans.start(self.tracer, claimed)
        try:
            with trio.CancelScope() as scope, trace_context.current(context):
                live = h.start(key, scope)
                self.renewer.started(claimed)
                outcome = await self.executor.run(claimed, live)
        finally:
            end_ms = claimed.server_ms()
            spans.end(self.tracer, claimed, started_ms, outcome, end_ms)
            self.free += 1
            self._poke()
            if outcome is not None and h.state(key) is State.RUNNING:
                h.finish(Finished(claimed, outcome, started_ms))
            else:  # lost (its process group was killed), or cancelled: nothing to report
                h.stopped(key)
                spans.stopped(self.tracer, claimed, self.worker_id, started_ms, end_ms)

    def drain(self) -> None:
        """Stop claiming, let running runs finish within the grace, hand back the rest."""
        self.draining.set()
        self._poke()

    def _info(self) -> WorkerInfo:
        """What the registry says of it now (registration.py fills in when it started)."""
        return WorkerInfo(
            capacity=self.concurrency,
            capacity_free=self.free,
            running=self.holdings.running_count,
            completed=self.completed,
            draining=self.draining.is_set(),
            overrunning=sum(self.overruns.overrunning.values()),
            queues=list(self.queues),
        )

    async def _hand_back(self) -> None:
        """Kill what still runs after the grace and give those runs back at once."""
        held = [h.claimed for h in self.holdings.running()]
        for claimed in held:
            self.holdings.lose(claimed.key)
        await hand_back(self.redis, self.dep, self.worker_id, held, self.metrics)

    async def _drain_and_leave(self) -> None:
        with trio.move_on_after(self.drain_grace_s):
            while self.holdings.running_count:
                await self._changed.wait()
                self._changed = trio.Event()
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await self._hand_back()
            await self.completer.flush()  # what did finish (until the 10 s are up)
            await self.limits.flush()  # their holds: the next waiting runs need not wait
            await self.registration.leave()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._wait_for_work, name="wait-for-work")
            nursery.start_soon(self._pusher.run, name="pass-tokens-on")
            if self.sweep_every_s:
                nursery.start_soon(self._sweep, self.sweep_every_s, name="sweep")
            nursery.start_soon(self.completer.run, name="completer")
            nursery.start_soon(self.executor.watchdog, name="handler-watchdog")
            nursery.start_soon(self.renewer.run, name="lease-renewer")
            nursery.start_soon(self.limits.run, name="concurrency-holds")
            nursery.start_soon(self.flusher.run, name="output-flusher")
            nursery.start_soon(self.overruns.run, name="overrun-watch")
            await self.registration.first()
            nursery.start_soon(self.registration.run, name="heartbeat")
            task_status.started()
            await self._claim_loop(nursery)

    async def _claim_loop(self, nursery: trio.Nursery) -> None:
        """Claim as many runs as there are free slots from shards that may have work."""
        backoff = Backoff()
        while True:
            if self.draining.is_set():
                await self._drain_and_leave()
                nursery.cancel_scope.cancel()
                return
            if self.free == 0 or not self._maybe_ready:
                if self.free > 0:
                    self._idle.set()
                await self._changed.wait()
                self._changed = trio.Event()
                continue
            if self._owe_take_up:  # a claim not known durable: its runs, once they are
                self._owe_take_up = not await self._take_up_pending()
            shard = self._maybe_ready.pop()
            want = self.free
            try:
                claimed = await self._claim(shard, want)
            except RedisError as exc:
                pause = backoff.next()
                self.metrics.redis_error(log, f"claim on shard {shard}", exc, pause)
                self._maybe_ready.add(shard)
                # The durable mode: the claim ran but the replicas did not have it in time.
                # Its runs are not executed until a later round trip finds them on the
                # replicas (a failover may yet lose the claim, and then another worker
                # runs them): taken up from this worker's pending ones.
                self._owe_take_up = self._owe_take_up or isinstance(exc, RedisNotDurable)
                await trio.sleep(pause)
                continue
            backoff.reset()
            self.holdings.gate.claimed(len(claimed))
            if len(claimed) == want:
                self._maybe_ready.add(shard)  # there may be more
                if shard in self._from_token:  # and other idle workers may take them
                    self._pusher.wake(shard, (self._from_token[shard],))
            self._from_token.pop(shard, None)
            for c in await self.limits.admit(shard, claimed):
                self._start(c)
