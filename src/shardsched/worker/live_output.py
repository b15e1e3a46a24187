"""Live output: what running commands printed so far goes to Redis every few seconds, so
``runs output --follow`` (and the SSE endpoint) shows a long job while it runs.

Only runs that have run for a whole flush period are written, so the short runs of a
burst cost nothing here; a chatty job costs one write per period (the new bytes, or the
last 64 KiB once it printed more). One script call per shard, fenced like a renewal: a
run this worker no longer holds is not written (lua/flush_output.lua)."""

from __future__ import annotations

import logging

import trio

from shardsched.runtime.metrics import Metrics
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.lua import runs as lua
from shardsched.store.redis import Redis, RedisError
from shardsched.worker.batching import by_shard, send_per_shard
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

    def _chunks(self) -> list[tuple[int, list[lua.OutputChunk]]]:
        h, now = self.holdings, trio.current_time()
        running = h.running()
        self._written = {h.claimed.key: self._written.get(h.claimed.key, 0) for h in running}
        chunks: list[tuple[int, lua.OutputChunk]] = []
        for held in running:
            claimed, live = held.claimed, held.live
            before = self._written[claimed.key]
            if live is None or live.total == before or now - claimed.claimed_local < self.every_s:
                continue
            new = live.total - before
            limit = self.quota.run
            if live.total <= limit and new <= len(live.buf):
                chunk = lua.OutputChunk(claimed.delivery, live.total, True, bytes(live.buf[-new:]))
            else:
                tail = bytes(live.buf[-limit:])
                chunk = lua.OutputChunk(claimed.delivery, live.total, False, tail)
            chunks.append((claimed.shard, chunk))
        return [(shard, [c for _, c in group]) for shard, group in by_shard(chunks, _first)]

    async def flush(self) -> None:
        """Write what every long-enough running command printed since the last flush."""

        def call(shard: int, chunks: list[lua.OutputChunk]) -> Call:
            return lua.flush_output(self.dep.shard(shard), self.worker_id, chunks, self.quota)

        try:
            sent = await send_per_shard(self.redis, self._chunks(), call)
        except RedisError as exc:
            self.metrics.redis_error(log, "output flush", exc, self.every_s)
            return
        for _shard, chunks, reply in sent:
            if isinstance(reply, Exception):
                self.metrics.redis_error(log, "output flush", reply, self.every_s)
                continue
            for chunk, written in zip(chunks, lua.decode_flushed(reply), strict=True):
                if written:
                    self._written[(chunk.delivery.run_id, chunk.delivery.token)] = chunk.total


def _first(pair: tuple[int, lua.OutputChunk]) -> int:
    return pair[0]
