"""Sending outcomes back: finished runs in batches, one ``complete.lua`` call per shard
per round trip, each applied only if this worker still holds the run.

An outcome is kept until its completion is applied or refused as stale: whatever Redis
could not take (connection lost, an error reply such as OOM) goes back to the front of the
queue and is sent again after a pause (complete.lua answers 0 to a replay of what it
already applied)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

import trio

from shardsched.core.ids import dag_run_of, job_of_run
from shardsched.core.models import RetryPolicy
from shardsched.core.pacing import Backoff
from shardsched.core.retry import verdict
from shardsched.runtime.metrics import Metrics
from shardsched.runtime.tracing import RunTracer
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.lua import runs as lua
from shardsched.store.redis import Redis, RedisError
from shardsched.worker import spans
from shardsched.worker.batching import by_shard, send_per_shard
from shardsched.worker.holdings import Finished, Holdings
from shardsched.worker.overruns import OverrunTracker

log = logging.getLogger(__name__)

#: Completions sent in one script call at most.
COMPLETE_BATCH = 500
#: Completions sent in one round trip at most (a backlog goes as several script calls).
COMPLETE_ROUND = 4 * COMPLETE_BATCH


class Completer:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str,
        holdings: Holdings,
        overruns: OverrunTracker,
        metrics: Metrics,
        released: Callable[[int, tuple[str, ...]], None],
        quota: lua.OutputQuota = lua.UNLIMITED,
        tracer: RunTracer | None = None,
    ) -> None:
        self.redis = redis
        self.tracer = tracer
        self.quota = quota  #: what output Redis keeps (lua/lib/outquota.lua)
        #: told of each shard (and the queues) where a completion put runs on a ready
        #: stream (DAG tasks released, a backfill tick started): the worker claims them
        #: or wakes another
        self.released = released
        self.dep = dep
        self.worker_id = worker_id
        self.holdings = holdings
        self.overruns = overruns
        self.metrics = metrics
        self.completed = 0
        self.refused = 0
        #: batches :meth:`run` has sent and not yet heard back of: a drain's flush waits
        #: for them (cancelled mid-call, a batch is lost to this process, and a successor
        #: under the same worker id takes its runs up and runs them again)
        self._in_flight = 0
        self._landed = trio.Event()

    async def run(self) -> None:
        """Complete what finishes, for as long as the worker runs."""
        h = self.holdings
        backoff = Backoff(cap=5.0)
        while True:
            if not h.queued:
                await h.finished_added.wait()
                h.finished_added = trio.Event()
                continue
            await h.gate.give_way()
            due = h.queued  # everything queued now goes, then the gate again
            while due > 0 and h.queued:
                batch = h.take(min(COMPLETE_ROUND, due))
                due -= len(batch)
                self._in_flight += 1
                try:
                    again = await self.complete(batch)
                finally:
                    self._in_flight -= 1
                    self._landed.set()
                    self._landed = trio.Event()
                if again:
                    h.again(again)
                    await trio.sleep(backoff.next())
                    break
                backoff.reset()

    async def flush(self) -> None:
        """Complete everything queued, and see :meth:`run`'s batch on its way land (a
        draining worker, before it cancels :meth:`run`; the caller bounds the time)."""
        h = self.holdings
        backoff = Backoff(cap=1.0)
        while h.queued or self._in_flight:
            if not h.queued:  # what comes back of it is queued again
                await self._landed.wait()
                continue
            again = await self.complete(h.take(COMPLETE_BATCH))
            if again:
                h.again(again)
                await trio.sleep(backoff.next())

    @staticmethod
    def _completion(f: Finished) -> lua.Completion:
        c, o = f.claimed, f.outcome
        policy = c.spec.retry_policy if c.spec else RetryPolicy()
        # the server's clock, carried forward from the claim
        state, retry_at = verdict(o.succeeded, c.attempt, policy, c.server_ms())
        return lua.Completion(
            c.delivery,
            state,
            o.exit_code,
            o.reason or "",
            o.output,
            f.started_ms,
            retry_at,
            o.total,
        )

    async def complete(self, batch: list[Finished]) -> list[Finished]:
        """Complete a batch (taken from the holdings); each applied or refused one is
        settled, and the runs whose completion must be sent again are returned."""
        pairs = [(f, self._completion(f)) for f in batch]

        def call(shard: int, items: list[tuple[Finished, lua.Completion]]) -> Call:
            completions = [c for _, c in items]
            sk, g = self.dep.shard(shard), self.dep.globals
            return lua.complete(sk, g, self.worker_id, completions, self.quota)

        try:
            started = trio.current_time()
            groups = by_shard(pairs, _shard_of, COMPLETE_BATCH)
            sent = await send_per_shard(self.redis, groups, call)
            self.metrics.ledger_write.labels("complete").observe(trio.current_time() - started)
        except RedisError as exc:  # idempotent: a replay answers 0
            self.metrics.redis_error(log, f"completing {len(batch)} runs", exc, 0)
            return batch
        again: list[Finished] = []
        ended: dict[str, int] = defaultdict(int)  #: applied completions by end state
        for shard, items, reply in sent:
            if isinstance(reply, Exception):
                self.metrics.redis_error(log, f"completing {len(items)} runs", reply, 0)
                again += [f for f, _ in items]
                continue
            now_ms, freed, codes, queues = lua.decode_completed(reply)
            if freed:
                self.released(shard, queues)
            for (f, completion), code in zip(items, codes, strict=True):
                state = completion.state
                self.holdings.settle(f.claimed.key)
                if code in (lua.Held.APPLIED, lua.Held.ALREADY_APPLIED):
                    self.completed += 1
                    if code == lua.Held.APPLIED:
                        ended[state] += 1
                        self._record(f, state, now_ms)
                        if self.tracer is not None:
                            final = completion.retry_at == ""
                            took_ms = round((trio.current_time() - started) * 1000)
                            spans.completed(
                                self.tracer, f, state, final, self.worker_id, now_ms, took_ms
                            )
                else:
                    self.refused += 1
                    log.warning(
                        "completion of %s refused (code %s)",
                        f.claimed.run_id,
                        int(code),
                        extra={"run_id": f.claimed.run_id, "shard": f.claimed.shard},
                    )
                    # its lease went elsewhere while it ran (a stall): its execution here
                    # is a lost one, kept as a failure beside the redelivery's
                    spans.stopped(self.tracer, f.claimed, self.worker_id, f.started_ms, now_ms)
        for state, count in ended.items():
            self.metrics.runs_finished.labels(state).inc(count)
        return again

    def _record(self, f: Finished, state: str, now_ms: int) -> None:
        """Logs of one applied completion; its duration joins its job's recent ones (not
        an inline handler's: nothing watches those for overruns)."""
        loud = state == "dead_letter" or log.isEnabledFor(logging.DEBUG)
        if f.inline and not loud:
            return
        job_id = job_of_run(f.claimed.run_id)
        if loud:
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
        if not f.inline:
            self.overruns.record(job_id, max(now_ms - f.started_ms, 0) / 1000)


def _shard_of(pair: tuple[Finished, lua.Completion]) -> int:
    return pair[0].claimed.shard
