"""A worker's side of concurrency keys (core/concurrency.py): a claimed run with a key
starts only once the key grants it (lua/ck_acquire.lua); a refused one is parked, state
``waiting``, and holds no slot (lua/park_runs.lua). A started run's hold is renewed with
its lease, and given back when the run leaves the worker (completed, lost, handed back),
which gives the next waiting runs their turn (ops/deployment/concurrency.py).

A hold outlives a worker that dies by no more than its lease: it lapses with the run's
lease, and the next acquire or the owner's sweep drops it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import trio

from shardsched.core.concurrency import resolve_key
from shardsched.core.errors import ShardschedError
from shardsched.core.pacing import Backoff
from shardsched.runtime.metrics import Metrics
from shardsched.store import ready
from shardsched.store.deployment import Deployment
from shardsched.store.drive import drive_async, redis_calls
from shardsched.store.lua import concurrency as lua
from shardsched.store.lua import runs as runs_lua
from shardsched.store.redis import Redis, RedisError
from shardsched.store.turns import give_turns
from shardsched.worker.holdings import Claimed, Holdings, Key, State

log = logging.getLogger(__name__)


def key_of(claimed: Claimed) -> str | None:
    """The concurrency key a claimed run is held to (None: none). A job names a template
    over its labels; validation made sure it resolves, so one that does not (a spec
    written by an earlier version) runs unheld, said in the log."""
    spec = claimed.spec
    if spec is None or spec.concurrency_key is None:
        return None
    if "{" not in spec.concurrency_key:
        return spec.concurrency_key
    try:
        return resolve_key(spec.concurrency_key, spec.labels)
    except ShardschedError as exc:
        log.warning(
            "run %s: concurrency key not resolved (%s): runs unheld",
            claimed.run_id,
            exc,
            extra={"run_id": claimed.run_id},
        )
        return None


def _job_limit(claimed: Claimed) -> int:
    return (claimed.spec.concurrency_limit or 0) if claimed.spec is not None else 0


def _hold_ms(claimed: Claimed) -> int:
    return round((claimed.spec.lease_s if claimed.spec else 30.0) * 1000)


class KeyLimits:
    """What a worker holds of concurrency keys: one per worker, fed by its claim loop
    (:meth:`admit`), its renewer (:meth:`renew`) and its holdings (:meth:`left`)."""

    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        worker_id: str,
        holdings: Holdings,
        metrics: Metrics,
        requeued: Callable[[int, tuple[str, ...]], None],
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.worker_id = worker_id
        self.holdings = holdings
        self.metrics = metrics
        #: told of each shard (and queues) where runs went back on a ready stream
        self.requeued = requeued
        self._held: dict[Key, str] = {}  #: started deliveries -> the key they hold
        self._leaving: list[tuple[str, str]] = []  #: (key, run id) holds to give back
        self._left = trio.Event()
        self.parked = 0  #: runs this worker parked (a test counts them)
        self._backoff = Backoff()  #: while the keys' scripts fail, the claim loop waits

    # -- starting -------------------------------------------------------------------

    async def admit(self, shard: int, claimed: list[Claimed]) -> list[Claimed]:
        """The claimed runs that may start now: those without a key, and those their key
        granted; the refused ones are parked (or handed back when Redis fails us)."""
        free: list[Claimed] = []
        keyed: dict[str, list[Claimed]] = defaultdict(list)
        for c in claimed:
            key = key_of(c)
            if key is None:
                free.append(c)
            else:
                keyed[key].append(c)
        if not keyed:
            return free
        keys = list(keyed)
        calls = [
            lua.ck_acquire(
                self.dep.concurrency(k),
                [lua.Ask(c.run_id, _hold_ms(c), _job_limit(c)) for c in keyed[k]],
            )
            for k in keys
        ]
        try:
            replies = await redis_calls(self.redis, calls)
        except RedisError as exc:
            replies = [exc] * len(keys)
        refused: list[tuple[Claimed, str]] = []
        failed: list[Claimed] = []
        for key, reply in zip(keys, replies, strict=True):
            runs = keyed[key]
            if isinstance(reply, Exception):
                failed += runs
                continue
            got = lua.decode_acquired(reply, len(runs))
            for c, granted in zip(runs, got.granted, strict=True):
                if granted:
                    self._held[c.key] = key
                    free.append(c)
                else:
                    refused.append((c, key))
            if got.turns:
                await self._give_turns(key, got.turns)
        if refused:
            await self._park(shard, refused)
        if failed:  # given back at once, and no claim until a pause has passed
            await self._hand_back(shard, failed)
            pause = self._backoff.next()
            error = next(r for r in replies if isinstance(r, Exception))
            self.metrics.redis_error(log, "acquiring concurrency keys", error, pause)
            await trio.sleep(pause)
        else:
            self._backoff.reset()
        return free

    async def _park(self, shard: int, refused: list[tuple[Claimed, str]]) -> None:
        g = self.dep.globals
        keys = sorted({key for _, key in refused})
        runs = [(c.delivery, key) for c, key in refused]
        try:
            # listed before it waits: the owner's sweep must know every key runs wait on
            await self.redis.pipeline([("SADD", g.waiting_keys, *keys)])
            (reply,) = await redis_calls(
                self.redis, [lua.park_runs(self.dep.shard(shard), self.worker_id, runs)]
            )
        except RedisError as exc:  # their leases lapse and the owner reclaims them
            self.metrics.redis_error(log, "parking runs over their key's limit", exc, 0)
            return
        if isinstance(reply, Exception):
            self.metrics.redis_error(log, "parking runs over their key's limit", reply, 0)
            return
        queues, codes = lua.decode_moved(reply)
        self.parked += sum(code == lua.Parked.WAITING for code in codes)
        if any(code == lua.Parked.TURN_CAME for code in codes):
            self.requeued(shard, queues)

    async def _hand_back(self, shard: int, runs: list[Claimed]) -> None:
        deliveries = [c.delivery for c in runs]
        call = runs_lua.release_runs(self.dep.shard(shard), self.worker_id, deliveries)
        try:
            (reply,) = await redis_calls(self.redis, [call])
        except RedisError:
            return  # their leases lapse and the owner reclaims them
        if not isinstance(reply, Exception) and int(reply[0]):
            self.requeued(shard, ready.woken(reply[1]))

    async def _give_turns(self, key: str, turns: Sequence[str]) -> None:
        try:
            wakes = await drive_async(give_turns(self.dep, key, turns), self.redis)
            if wakes:
                await redis_calls(self.redis, ready.push_wakes(self.dep.globals, wakes))
        except (RedisError, ShardschedError) as exc:  # the owner's sweep puts them back
            self.metrics.redis_error(log, f"giving turns on {key}", exc, 0)

    # -- holding --------------------------------------------------------------------

    async def renew(self, held: Iterable[Claimed]) -> None:
        """Renew the holds of runs renewed with their leases; a run whose hold is gone
        (lapsed and dropped: this worker could not renew it in time) is stopped."""
        by_key: dict[str, list[Claimed]] = defaultdict(list)
        for c in held:
            if (key := self._held.get(c.key)) is not None:
                by_key[key].append(c)
        if not by_key:
            return
        keys = list(by_key)
        calls = [
            lua.ck_renew(self.dep.concurrency(k), [(c.run_id, _hold_ms(c)) for c in by_key[k]])
            for k in keys
        ]
        try:
            replies = await redis_calls(self.redis, calls)
        except RedisError as exc:
            self.metrics.redis_error(log, "renewing concurrency holds", exc, 0)
            return
        for key, reply in zip(keys, replies, strict=True):
            if isinstance(reply, Exception):
                self.metrics.redis_error(log, f"renewing holds on {key}", reply, 0)
                continue
            for c, code in zip(by_key[key], reply, strict=True):
                if not int(code) and self.holdings.state(c.key) is State.RUNNING:
                    log.warning(
                        "run %s lost its hold on %s: stopping it",
                        c.run_id,
                        key,
                        extra={"run_id": c.run_id, "shard": c.shard},
                    )
                    self.holdings.lose(c.key)

    def left(self, claimed: Claimed) -> None:
        """A delivery left the worker (completed, lost, handed back): its hold goes back."""
        key = self._held.pop(claimed.key, None)
        if key is not None:
            self._leaving.append((key, claimed.run_id))
            self._left.set()

    async def run(self) -> None:
        """Give holds back as runs leave, each key's in one call, and the turns that frees
        to the runs waiting next."""
        backoff = Backoff(cap=5.0)
        while True:
            await self._left.wait()
            self._left = trio.Event()
            try:
                await self.flush()
                backoff.reset()
            except RedisError as exc:
                pause = backoff.next()
                self.metrics.redis_error(log, "giving concurrency holds back", exc, pause)
                self._left.set()
                await trio.sleep(pause)

    async def flush(self) -> None:
        """Give back the holds of the runs that left; a lost connection raises RedisError
        and keeps them for the next try."""
        leaving, self._leaving = self._leaving, []
        if not leaving:
            return
        by_key: dict[str, list[str]] = defaultdict(list)
        for key, rid in leaving:
            by_key[key].append(rid)
        keys = list(by_key)
        calls = [lua.ck_release(self.dep.concurrency(k), by_key[k]) for k in keys]
        try:
            replies = await redis_calls(self.redis, calls)
        except RedisError:
            self._leaving[:0] = leaving
            raise
        for key, reply in zip(keys, replies, strict=True):
            if isinstance(reply, Exception):  # the hold lapses with the run's lease
                self.metrics.redis_error(log, f"giving holds on {key} back", reply, 0)
            elif reply:
                await self._give_turns(key, lua.decode_turns(reply))
