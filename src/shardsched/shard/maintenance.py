"""An owner's once-a-second chores, beside firing: report DAG tasks released but not
claimed within their SLA (``lua/dag_stalled.lua``, fenced), resume the jobs paused
until now, in every shard the node holds, sweep the concurrency keys those shards
look after (shard/limits.py), look at a slice of one shard's jobs for an active job with
no timer entry and at the due deadlines and dead-man's switches, release what paced
backfills' paces allow (shard/liveness.py), deliver events left pending and release
events held for jobs resumed (shard/event_chores.py), and,
once per shard, index the names of jobs made before
shards kept an index of names (``lua/index_names.lua``, fenced); and every
LAG_SAMPLE_S, record the node's trigger lag in the deployment's lag history (a day of it,
for the console's chart: ops/deployment/lag_history.py)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import trio

from shardsched.core.errors import ShardschedError
from shardsched.runtime.metrics import Metrics
from shardsched.shard.event_chores import EventChores
from shardsched.shard.limits import sweep_keys
from shardsched.shard.liveness import TimerCheck, release_paced, watch_deadlines
from shardsched.shard.rounds import every
from shardsched.store.calls import Op
from shardsched.store.deployment import Deployment
from shardsched.store.drive import drive_async, redis_calls
from shardsched.store.lua import dags as dags_lua
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.lua import runs as runs_lua
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)

#: How often the owner reports stalled DAG tasks and resumes jobs paused until now.
MAINTENANCE_EVERY_S = 1.0
#: How often a node adds its trigger lag (p50/p99 of the last minute) to the history.
LAG_SAMPLE_S = 15.0
LAG_KEPT_MS = 86_400_000


#: Resume a job paused until a time if it still is (``ops.resume_if_due``: a resume is an
#: operation, with its checks and its change log, not an owner's own write). The process
#: that builds the node passes it in (service.py), so shard/ imports no operation.
AutoResume = Callable[[Deployment, str, int], Op]


class Maintainer:
    """One task per node; ``held`` answers the (shard, epoch) of every lease held now;
    without ``auto_resume`` (a node a test builds bare) no job paused until a time is
    resumed."""

    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        metrics: Metrics,
        held: Callable[[], list[tuple[int, int]]],
        node_id: str = "",
        auto_resume: AutoResume | None = None,
    ) -> None:
        self.redis = redis
        self.auto_resume = auto_resume
        self.node_id = node_id
        self._lag_sampled = -math.inf  #: trio's clock at the last lag sample
        self.dep = dep
        self.metrics = metrics
        self.held = held
        self.dag_stalled = 0
        self.auto_resumed = 0
        self.rounds = 0  #: maintenance rounds done (what a test counts instead of seconds)
        self.turns_given = 0  #: waiting runs the sweep of concurrency keys put back
        self.names_indexed: set[int] = set()  #: shards whose older jobs' names are indexed
        self.timers = TimerCheck(redis, dep, metrics)  #: liveness (shard/liveness.py)
        self.deadlines_missed = 0  #: deadlines and dead-man's switches found missed here
        self.paced_released = 0  #: paced backfill runs released here
        self.events = EventChores(redis, dep, metrics)  #: shard/event_chores.py

    async def run(self) -> None:
        """Every second: report DAG tasks released but not claimed within their SLA, and
        resume the jobs paused until now, in every owned shard."""
        await every(
            MAINTENANCE_EVERY_S,
            self._counted_round,
            what="maintenance round",
            metrics=self.metrics,
            log=log,
        )

    async def _counted_round(self) -> None:
        await self._maintenance_round()
        self.rounds += 1

    async def _maintenance_round(self) -> None:
        if trio.current_time() - self._lag_sampled >= LAG_SAMPLE_S:
            await self._sample_lag()
        held = self.held()
        if not held:
            return
        calls = [dags_lua.dag_stalled(self.dep.shard(shard), epoch, 1000) for shard, epoch in held]
        replies = await redis_calls(self.redis, calls)
        for (shard, _), stalled in zip(held, replies, strict=True):
            if isinstance(stalled, Exception):
                log.error("stall check on shard %d failed: %s", shard, stalled)
            elif stalled[0] == runs_lua.Fenced.OK and stalled[1]:
                self.dag_stalled += stalled[1]
                for dag_id in stalled[2:]:
                    self.metrics.dag_stalled.labels(self.metrics.dag_label(dag_id.decode())).inc()
                log.warning(
                    "shard %d: %d DAG task runs released and unclaimed past their SLA",
                    shard,
                    stalled[1],
                    extra={"shard": shard, "epoch": dict(self.held()).get(shard)},
                )
        await self._index_names([(s, e) for s, e in held if s not in self.names_indexed])
        if self.auto_resume is not None:
            await self._auto_resume(self.auto_resume, [shard for shard, _ in held])
        self.turns_given += await sweep_keys(
            self.redis, self.dep, {shard for shard, _ in held}, self.metrics
        )
        await self.timers.round(held)
        self.deadlines_missed += await watch_deadlines(self.redis, self.dep, self.metrics, held)
        self.paced_released += await release_paced(self.redis, self.dep, held)
        await self.events.round(held)

    async def _sample_lag(self) -> None:
        """The node's lag over the last minute into the lag history (kept a day). Not
        written while Redis is full (OOM): the chart shows a gap, firing goes on."""
        window = self.metrics.lag_window
        p50, p99 = window.quantiles((0.5, 0.99))
        now_ms = await self.redis.time_ms()
        fields = ["n", self.node_id, "p50", "" if p50 is None else f"{p50:.6f}"]
        fields += ["p99", "" if p99 is None else f"{p99:.6f}", "f", str(window.total())]
        key = self.dep.globals.lag_history
        try:
            await self.redis.execute("XADD", key, "MINID", now_ms - LAG_KEPT_MS, "*", *fields)
        except RedisError as exc:
            log.debug("lag sample not recorded: %s", exc)
        self._lag_sampled = trio.current_time()

    async def _index_names(self, todo: list[tuple[int, int]]) -> None:
        """A slice of each shard's older jobs into its index of names, until it is done."""
        if not todo:
            return
        calls = [jobs_lua.index_names(self.dep.shard(shard), epoch) for shard, epoch in todo]
        for (shard, _), reply in zip(todo, await redis_calls(self.redis, calls), strict=True):
            if isinstance(reply, Exception):
                log.error("indexing names on shard %d failed: %s", shard, reply)
            elif reply[0] == 0:
                self.names_indexed.add(shard)
                if reply[1]:
                    log.info("shard %d: names of its older jobs indexed", shard)

    async def _auto_resume(self, resume_if_due: AutoResume, shards: list[int]) -> None:
        """Resume the owned shards' jobs paused until now or earlier (server clock)."""
        now_ms = await self.redis.time_ms()
        due = await self.redis.pipeline(
            [
                (
                    "ZRANGE",
                    self.dep.shard(s).resumes,
                    "-inf",
                    now_ms,
                    "BYSCORE",
                    "LIMIT",
                    0,
                    100,
                    "WITHSCORES",
                )
                for s in shards
            ]
        )
        for reply in due:
            for i in range(0, len(reply), 2):
                job_id, until = reply[i].decode(), int(float(reply[i + 1]))
                try:
                    resumed = await drive_async(resume_if_due(self.dep, job_id, until), self.redis)
                except ShardschedError as exc:  # one job's trouble must not stop the node
                    log.error("auto-resume of %s failed: %s", job_id, exc)
                    continue
                if resumed:
                    self.auto_resumed += 1
                    log.info("job %s resumed: paused until %d", job_id, until)
