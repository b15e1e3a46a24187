"""The owner's retention task: finished runs move from Redis to the cold archive.

One task per node walks the shards it holds, a slice at a time (``store/retention.py``):
it archives the slice first (Parquet, in a worker thread: the loop keeps firing) and
removes it from Redis second, fenced by the shard's epoch (``lua/expire_history.lua``). A
crash in between leaves the runs in both places; the next pass archives them again and
readers dedupe by run id, so nothing is lost and nothing shows twice. Slices are small
and paced, so clean-up never holds up firing. A pass starts every ``every_s`` (at once
after a pass that found more than its slices take), so each writes about one file per
shard and day, holding what came due since the last pass.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import trio

from shardsched.core.instants import from_ms
from shardsched.core.pacing import Backoff
from shardsched.runtime.metrics import Metrics
from shardsched.store.deployment import Deployment
from shardsched.store.drive import call_script, drive_off_loop
from shardsched.store.lua import retention as lua

if TYPE_CHECKING:  # pyarrow, 180 ms at import: paid only where an archive is opened
    from shardsched.store.archive import Archive
from shardsched.store.redis import Redis, RedisError
from shardsched.store.retention import RetentionDefaults, Slice, retention_slice

log = logging.getLogger(__name__)

#: After each slice the task rests this many times as long as the slice took.
DUTY_REST = 1.0


class Retainer:
    """Keeps the held shards' hot history within its retention (one per node)."""

    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        archive: Archive,
        defaults: RetentionDefaults,
        leases: Mapping[int, int],
        metrics: Metrics | None = None,
        pause_s: float = 0.02,
        every_s: float | None = None,
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.archive = archive
        self.defaults = defaults
        self.leases = leases  #: shard -> epoch, the manager's live view
        self.metrics = metrics or Metrics()
        self.pause_s = pause_s
        self.every_s = defaults.every_s if every_s is None else every_s
        self.archived = 0  #: runs, DAG runs and skip records archived and removed here
        self.passes = 0  #: whole passes over the held shards

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        backoff = Backoff(first=1.0, cap=30.0)
        while True:
            try:
                backlog = await self.sweep()
                backoff.reset()
            except (RedisError, OSError) as exc:  # Redis or the archive is sick: later
                pause = backoff.next()
                self.metrics.redis_error(log, "retention", exc, pause)
                await trio.sleep(pause)
                continue
            self.passes += 1
            if not backlog:
                await trio.sleep(self.every_s)

    async def sweep(self) -> bool:
        """One pass over every held shard, slice by slice; whether a slice was full (more
        is due than a pass takes: the next pass starts at once)."""
        backlog = False
        for shard, epoch in sorted(self.leases.items()):
            start = 0
            while True:
                began = trio.current_time()
                # its pure steps (decoding a thousand records) in a worker thread: the
                # loop that fires keeps the GIL's switch interval, not the whole slice
                found: Slice = await drive_off_loop(
                    retention_slice(self.dep, shard, start, self.defaults), self.redis
                )
                if found.expiring and not await self._move(shard, epoch, found):
                    break  # the shard moved to another owner
                backlog |= found.more
                # a slice at a time, resting as long as it took (DUTY_REST): clean-up takes
                # at most half the node's time, spread out; firing always has the rest
                took = trio.current_time() - began
                await trio.sleep(max(self.pause_s, DUTY_REST * took))
                start = found.next_index
                if start == 0:
                    await self._trim_events(shard, epoch, found.now_ms)
                    break
        return backlog

    async def _trim_events(self, shard: int, epoch: int, now_ms: int) -> None:
        """The shard's events older than the deployment's retention go (no archive: the
        runs they describe are archived with their final state)."""
        if self.defaults.max_age_s is None:
            return
        before = now_ms - self.defaults.max_age_s * 1000
        call = lua.expire_history(self.dep.shard(shard), epoch, [], before)
        await call_script(self.redis, call)

    async def _move(self, shard: int, epoch: int, found: Slice) -> bool:
        """Archive the slice, then take it out of Redis (fenced); False when the shard's
        epoch moved on."""
        archived_at = from_ms(found.now_ms)
        if found.runs:
            await trio.to_thread.run_sync(self.archive.write, shard, found.runs, archived_at)
        if found.records:
            await trio.to_thread.run_sync(
                self.archive.write_records, shard, found.records, archived_at
            )
        reply = await call_script(
            self.redis, lua.expire_history(self.dep.shard(shard), epoch, found.expiring)
        )
        expired = lua.decode_expired(reply)
        if expired is None:
            log.warning("retention: shard %d moved to another owner", shard)
            return False
        self.archived += expired.removed
        self.metrics.archived.inc(expired.removed)
        log.debug(
            "retention: shard %d archived %d items (%d changed meanwhile, kept)",
            shard,
            expired.removed,
            expired.kept,
            extra={"shard": shard, "epoch": epoch},
        )
        return True
