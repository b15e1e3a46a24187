"""The worker: claims fired runs from the shard streams and executes them in slots.

A worker claims only as many runs as it has free slots, with ``lua/claim.lua`` (the
consumer-group read and the move to ``running`` are one atomic step). It learns which
shards have work from the ready channel (one pub/sub connection, whatever the shard
count), and looks at every shard once after each (re)subscription and every
``sweep_every_s`` as a safety net for a lost message. Completion goes through
``lua/complete.lua``, which refuses it if the worker no longer holds the run.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass

import msgspec
import trio

from shardsched.keys import CONSUMER_GROUP
from shardsched.models import JobSpec
from shardsched.ops import Deployment
from shardsched.redis import Redis, RedisConnectionError, ReplyError
from shardsched.shard.cron import from_ms
from shardsched.worker.runner import Outcome, run_command

log = logging.getLogger(__name__)
_spec_decoder = msgspec.json.Decoder(JobSpec)


def _decode_spec(raw: bytes) -> JobSpec | None:
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
    spec: JobSpec | None  #: None when the job's definition is gone or unreadable
    scheduled_for_ms: int
    attempt: int
    token: int


class Worker:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str | None = None,
        concurrency: int = 16,
        sweep_every_s: float = 5.0,
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.worker_id = worker_id or default_worker_id()
        self.concurrency = concurrency
        self.sweep_every_s = sweep_every_s
        self.free = concurrency
        self.completed = 0
        self._maybe_ready: set[int] = set()
        self._changed = trio.Event()

    def _poke(self) -> None:
        self._changed.set()

    def _mark_all(self) -> None:
        self._maybe_ready.update(range(self.dep.n_shards))
        self._poke()

    async def _listen(self, *, task_status: trio.TaskStatus[None]) -> None:
        started = False
        async for msg in self.redis.subscribe(self.dep.globals.ready_channel):
            if msg is None:
                self._mark_all()
                if not started:
                    task_status.started()
                    started = True
            else:
                self._maybe_ready.add(int(msg))
                self._poke()

    async def _sweep(self) -> None:
        while True:
            await trio.sleep(self.sweep_every_s)
            self._mark_all()

    async def _claim(self, shard: int, count: int) -> list[Claimed]:
        sk = self.dep.shard(shard)
        reply = await self.redis.script(
            "claim", (sk.ready,), (sk.base, CONSUMER_GROUP, self.worker_id, count)
        )
        return [
            Claimed(
                shard=shard,
                entry_id=reply[i].decode(),
                run_id=reply[i + 1].decode(),
                spec=_decode_spec(reply[i + 2]),
                scheduled_for_ms=int(reply[i + 3]),
                attempt=int(reply[i + 4]),
                token=int(reply[i + 5]),
            )
            for i in range(0, len(reply), 8)
        ]

    async def _execute(self, claimed: Claimed) -> None:
        try:
            env = {
                "SHARDSCHED_RUN_ID": claimed.run_id,
                "SHARDSCHED_JOB_ID": claimed.run_id.split(":", 1)[0],
                "SHARDSCHED_ATTEMPT": str(claimed.attempt),
                "SHARDSCHED_SCHEDULED_FOR": from_ms(claimed.scheduled_for_ms)
                .isoformat()
                .replace("+00:00", "Z"),
            }
            if claimed.spec is None:
                outcome = Outcome(None, "job definition missing", b"")
            else:
                outcome = await run_command(claimed.spec.command, claimed.spec.timeout_s, env)
            await self._complete(claimed, outcome)
        finally:
            self.free += 1
            self._poke()

    async def _complete(self, claimed: Claimed, outcome: Outcome) -> None:
        sk = self.dep.shard(claimed.shard)
        args = (
            CONSUMER_GROUP,
            claimed.entry_id,
            self.worker_id,
            claimed.token,
            "succeeded" if outcome.succeeded else "failed",
            "" if outcome.exit_code is None else outcome.exit_code,
            outcome.reason or "",
            outcome.output,
        )
        keys = (sk.ready, sk.run(claimed.run_id), sk.output(claimed.run_id))
        delay = 0.05
        while True:
            try:
                reply = await self.redis.script("complete", keys, args)
                break
            except ReplyError as exc:
                log.error("complete %s failed: %s", claimed.run_id, exc)
                return
            except RedisConnectionError as exc:  # the script is idempotent: retry it
                log.warning("complete %s failed (%s); retrying", claimed.run_id, exc)
                await trio.sleep(delay)
                delay = min(delay * 2, 2.0)
        if reply[0] in (0, 1):
            self.completed += 1
        else:
            log.warning("completion of %s refused (code %s)", claimed.run_id, reply[0])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self._listen, name="ready-listener")
            nursery.start_soon(self._sweep, name="sweep")
            task_status.started()
            delay = 0.05
            while True:
                if self.free == 0 or not self._maybe_ready:
                    await self._changed.wait()
                    self._changed = trio.Event()
                    continue
                shard = self._maybe_ready.pop()
                want = self.free
                try:
                    claimed = await self._claim(shard, want)
                except (RedisConnectionError, ReplyError) as exc:
                    log.warning("claim on shard %d failed: %s", shard, exc)
                    self._maybe_ready.add(shard)
                    await trio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                delay = 0.05
                if len(claimed) == want:
                    self._maybe_ready.add(shard)  # there may be more
                for c in claimed:
                    self.free -= 1
                    nursery.start_soon(self._execute, c, name=f"run-{c.run_id}")
