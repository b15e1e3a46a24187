"""One task per process pushes the wake tokens its parts ask for (``store/ready.py`` says
what a token is): the tokens of many shards in one round trip, a failed push tried again."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import trio

from shardsched.core.pacing import Backoff
from shardsched.store.drive import redis_calls
from shardsched.store.keys import GlobalKeys
from shardsched.store.ready import Wake, push_wakes
from shardsched.store.redis import Redis, RedisError


class TokenPusher:
    """Pushes the tokens asked for (:meth:`wake`), those of many shards in one round trip,
    from one task (:meth:`run`); a failed push is tried again after a pause, and
    ``on_error(exc, pause)`` is told."""

    def __init__(
        self, redis: Redis, g: GlobalKeys, on_error: Callable[[Exception, float], None]
    ) -> None:
        self.redis = redis
        self.g = g
        self.on_error = on_error
        self._pending: set[Wake] = set()
        self._asked = trio.Event()

    def wake(self, shard: int, queues: Iterable[str] = ("",)) -> None:
        """Push a token for ``shard`` soon onto each queue's LIST (queues as stored, ''
        the default), with any others asked for meanwhile."""
        for queue in queues:
            self._pending.add((shard, queue))
        self._asked.set()

    async def run(self) -> None:
        backoff = Backoff()
        while True:
            await self._asked.wait()
            self._asked = trio.Event()
            wakes, self._pending = self._pending, set()
            try:
                await redis_calls(self.redis, push_wakes(self.g, sorted(wakes)))
                backoff.reset()
            except RedisError as exc:
                pause = backoff.next()
                self.on_error(exc, pause)
                self._pending |= wakes
                self._asked.set()
                await trio.sleep(pause)
