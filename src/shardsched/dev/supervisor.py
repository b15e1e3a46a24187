"""``dev`` keeps what it starts alive: a worker process, the embedded redis-server or the
in-process node that dies is logged loudly and started again after a capped backoff (reset
once it has run for a minute), and its state is written to Redis (the global
``supervised`` hash) for ``shardsched status`` to show. A child that dies before it was
ever ready ends ``dev`` instead, with the reason: that is a set-up error, not a crash.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from shardsched.core.pacing import Backoff
from shardsched.runtime.redis_server import stop_process
from shardsched.store.deployment import Deployment
from shardsched.store.records import Supervised
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)

#: A child that ran this long before it died starts again at the first backoff step.
HEALTHY_AFTER_S = 60.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0

_encoder = msgspec.json.Encoder()


def describe_exit(returncode: int) -> str:
    """How a child ended, as a person reads it: ``exit 1``, ``signal SIGKILL``."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit {returncode}"


class Supervisor:
    """Owns the state of every child it keeps; one task per child."""

    def __init__(self, redis: Redis | None = None, dep: Deployment | None = None) -> None:
        self.redis, self.dep = redis, dep
        self.children: dict[str, Supervised] = {}
        self._unpublished = trio.Event()  # set while Redis has not heard the last change

    def attach(self, redis: Redis, dep: Deployment) -> None:
        """Where to publish states from now on (Redis is up); publishes what is known."""
        self.redis, self.dep = redis, dep

    async def publish(self) -> None:
        """Write every child's state to Redis; a failure is logged, never fatal."""
        if self.redis is None or self.dep is None or not self.children:
            return
        fields: list[Any] = []
        for name, state in self.children.items():
            fields += [name, _encoder.encode(state)]
        try:
            await self.redis.execute("HSET", self.dep.globals.supervised, *fields)
        except RedisError as exc:
            log.warning("dev: could not record its children's state in Redis: %s", exc)
            self._unpublished.set()

    async def republish(self) -> None:
        """Tell Redis again what it missed (it was down: perhaps the very restart of the
        embedded server being recorded), once a second until it hears it."""
        while True:
            await self._unpublished.wait()
            self._unpublished = trio.Event()
            await trio.sleep(1.0)
            await self.publish()

    async def forget(self) -> None:
        """Remove this dev's children from Redis (on the way out; best effort)."""
        if self.redis is None or self.dep is None or not self.children:
            return
        with trio.move_on_after(2, shield=True):
            try:
                await self.redis.execute("HDEL", self.dep.globals.supervised, *self.children)
            except RedisError:
                pass

    async def _set(self, name: str, kind: str, state: str, **fields: Any) -> None:
        old = self.children.get(name)
        base = old or Supervised(name, kind, state)
        restarts = base.restarts + (old is not None and state == "running")
        now_ms = int(time.time() * 1000)
        self.children[name] = msgspec.structs.replace(
            base, state=state, since_ms=now_ms, restarts=restarts, **fields
        )
        await self.publish()

    async def keep_process(
        self,
        name: str,
        kind: str,
        start: Callable[[], Awaitable[trio.Process]],
        *,
        stop_after: trio.Event | None = None,
        task_status: trio.TaskStatus[trio.Process] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the process ``start`` makes, and make another each time it dies; ready with
        the first one. Cancellation stops the one running (SIGTERM, then SIGKILL), once
        ``stop_after`` is set when given (Redis outlives the processes that use it)."""
        backoff = Backoff(first=FIRST_BACKOFF_S, cap=MAX_BACKOFF_S)
        first = True
        while True:
            proc = await start()
            began = trio.current_time()
            await self._set(name, kind, "running", pid=proc.pid)
            if first:
                task_status.started(proc)
                first = False
            try:
                code = await proc.wait()
            finally:
                if stop_after is not None and proc.returncode is None:
                    with trio.move_on_after(30, shield=True):
                        await stop_after.wait()
                await stop_process(proc)  # cancelled: stop it; exited: release its hold
            if trio.current_time() - began >= HEALTHY_AFTER_S:
                backoff.reset()
            pause = backoff.next()
            how = describe_exit(code)
            log.error(
                "dev: %s (pid %d) died: %s; starting it again in %.1f s", name, proc.pid, how, pause
            )
            await self._set(name, kind, "restarting", pid=None, last_exit=how)
            await trio.sleep(pause)

    async def keep_task(
        self,
        name: str,
        kind: str,
        run: Callable[..., Awaitable[Any]],
        *,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the in-process task ``run`` (a ``task_status`` task), and start it again each
        time it fails once it has been ready; ready with its first readiness value. A
        failure before it was ever ready propagates (a set-up error)."""
        backoff = Backoff(first=FIRST_BACKOFF_S, cap=MAX_BACKOFF_S)
        ready = False
        while True:
            began = trio.current_time()
            failure: str | None = None
            try:
                async with trio.open_nursery() as nursery:
                    value = await nursery.start(run)
                    await self._set(name, kind, "running", pid=os.getpid())
                    if not ready:
                        task_status.started(value)
                        ready = True
            except* Exception as group:
                if not ready:
                    raise
                failure = "; ".join(f"{type(e).__name__}: {e}" for e in group.exceptions)[:500]
                log.error("dev: %s failed", name, exc_info=group)
            if trio.current_time() - began >= HEALTHY_AFTER_S:
                backoff.reset()
            pause = backoff.next()
            how = failure or "returned"
            log.error("dev: %s died: %s; starting it again in %.1f s", name, how, pause)
            await self._set(name, kind, "restarting", last_exit=how)
            await trio.sleep(pause)
