"""A node's copy of the deployment's named calendars (core/calendars.py), which its shard
actors decide calendar ticks with.

One task owns it: it reads the calendars before the node fires anything (a job must not
fire on an excluded day because its node just started), then looks at their version once
a second, and at once when the wake channel says a calendar changed, and reads them
again when it moved (ops/schedules/calendars.py increments it and publishes on every change).
Actors only read :attr:`CalendarBook.calendars`, replaced whole, never changed in place.
While Redis is unreachable the last copy stands (so does the firing, which needs Redis
anyway)."""

from __future__ import annotations

import logging

import trio

from shardsched.core.calendars import Calendar
from shardsched.core.errors import ShardschedError
from shardsched.core.pacing import Backoff
from shardsched.runtime.metrics import Metrics
from shardsched.store.calendars import read_book
from shardsched.store.calls import Call, check
from shardsched.store.deployment import Deployment
from shardsched.store.drive import drive_async, redis_calls
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)

#: How often a node looks whether a calendar changed.
CALENDARS_EVERY_S = 1.0


class CalendarBook:
    def __init__(self, redis: Redis, dep: Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics
        self.calendars: dict[str, Calendar] = {}  #: replaced whole on each change
        self._version: object = None
        self.loads = 0  #: how many times the calendars were read (a test waits on it)
        self._changed = trio.Event()

    async def refresh(self) -> None:
        """Read the calendars again if their version moved since the last read."""
        key = self.dep.globals.calendars.version
        version = check((await redis_calls(self.redis, [Call(("GET", key))]))[0])
        if version == self._version and self.loads:
            return
        self.calendars = await drive_async(read_book(self.dep), self.redis)
        self._version = version
        self.loads += 1

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        backoff = Backoff(first=0.1, cap=5.0)
        while True:  # the first read, before the node fires anything
            try:
                await self.refresh()
                break
            except (RedisError, ShardschedError) as exc:
                pause = backoff.next()
                self.metrics.redis_error(log, "reading the calendars", exc, pause)
                await trio.sleep(pause)
        task_status.started()
        while True:
            with trio.move_on_after(CALENDARS_EVERY_S):
                await self._changed.wait()
            self._changed = trio.Event()
            try:
                await self.refresh()
                backoff.reset()
            except (RedisError, ShardschedError) as exc:
                pause = backoff.next()
                self.metrics.redis_error(log, "reading the calendars", exc, pause)
                await trio.sleep(pause)

    def changed(self) -> None:
        """A calendar changed (the wake channel said so): read them now, not in a second."""
        self._changed.set()
