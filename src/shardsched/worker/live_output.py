"""Live output: what running commands printed so far goes to Redis every few seconds, so
``runs output --follow`` (and the SSE endpoint) shows a long job while it runs.

Only runs that have run for a whole flush period are written, so the short runs of a
burst cost nothing here; a chatty job costs one write per period (the new bytes, or the
last 64 KiB once it printed more). One script call per shard, fenced like a renewal: a
run this worker no longer holds is not written (lua/flush_output.lua)."""

from __future__ import annotations

import logging
from collections import defaultdict

import trio

from shardsched.runtime.metrics import Metrics
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.lua import runs as lua
from shardsched.store.redis import Redis, RedisError
from shardsched.worker.holdings import Holdings

log = logging.getLogger(__name__)

#: How often running commands' new output is written.
FLUSH_EVERY_S = 2.0


class OutputFlusher:
    """One task per worker; remembers how much of each run's output it wrote."""

    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str,
        holdings: Holdings,
        metrics: Metrics,
        every_s: float = FLUSH_EVERY_S,
        quota: lua.OutputQuota = lua.UNLIMITED,
    ) -> None:
        self.redis = redis
        self.quota = quota  #: what output Redis keeps (lua/lib/outquota.lua)
        self.dep = dep
        self.worker_id = worker_id
        self.holdings = holdings
        self.metrics = metrics
        self.every_s = every_s
        self._written: dict[tuple[str, int], int] = {}

    async def run(self) -> None:
        while True:
            await self.holdings.wait_running()
            await trio.sleep(self.every_s)
            await self.flush()

    def _chunks(self) -> dict[int, list[lua.OutputChunk]]:
        h, now = self.holdings, trio.current_time()
        self._written = {key: n for key, n in self._written.items() if key in h.live}
        by_shard: dict[int, list[lua.OutputChunk]] = defaultdict(list)
        for key, live in list(h.live.items()):
            held = h.running.get(key)
            before = self._written.get(key, 0)
            if held is None or live.total == before or now - held[0].claimed_local < self.every_s:
                continue
            new = live.total - before
            limit = self.quota.run
            if live.total <= limit and new <= len(live.buf):
                chunk = lua.OutputChunk(held[0].delivery, live.total, True, bytes(live.buf[-new:]))
            else:
                tail = bytes(live.buf[-limit:])
                chunk = lua.OutputChunk(held[0].delivery, live.total, False, tail)
            by_shard[held[0].shard].append(chunk)
        return by_shard

    async def flush(self) -> None:
        """Write what every long-enough running command printed since the last flush."""
        by_shard = self._chunks()
        if not by_shard:
            return
        calls = [
            lua.flush_output(self.dep.shard(s), self.worker_id, chunks, self.quota)
            for s, chunks in by_shard.items()
        ]
        try:
            replies = await redis_calls(self.redis, calls)
        except RedisError as exc:
            self.metrics.redis_error(log, "output flush", exc, self.every_s)
            return
        for chunks, reply in zip(by_shard.values(), replies, strict=True):
            if isinstance(reply, Exception):
                self.metrics.redis_error(log, "output flush", reply, self.every_s)
                continue
            for chunk, written in zip(chunks, lua.decode_flushed(reply), strict=True):
                if written:
                    self._written[(chunk.delivery.run_id, chunk.delivery.token)] = chunk.total
