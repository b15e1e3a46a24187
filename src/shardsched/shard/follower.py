"""The owner's reader of its shards' event streams: what the scheduler decided or saw
happen, turned into notification matches (core/notify.py) on the deployment's outbox,
and, when tracing is on, into the root spans of firings that end without a worker's
completion (a DAG run, a cancelled run, a poison run).

One task per node. Every FOLLOW_EVERY_S it reads each owned shard's stream after its
cursor, kept in the shard (lua/follow_events.lua, fenced by the epoch), so a new owner
goes on where the old one stopped. A match is put on the outbox before the cursor moves,
and keyed by its event's place, so a crash between the two adds nothing twice
(lua/notify_enqueue.lua). With no rule and tracing off it reads nothing at all; a cursor
older than FOLLOW_STALE_MS (rules were off meanwhile) is not used: reading starts a few
seconds back (the rules are read every RULES_EVERY_S), so a new rule hears of what
happens from its making on and never reports the long past.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
import trio

from shardsched.core.ids import dag_run_of, parse_dag_run_id, parse_run_id
from shardsched.core.labels import LabelsOnly
from shardsched.core.notify import Kind, Noted, Rule, is_dag_run, noted
from shardsched.runtime.metrics import Metrics
from shardsched.runtime.tracing import RunTracer
from shardsched.shard.rounds import every
from shardsched.store.deployment import Deployment
from shardsched.store.drive import redis_calls
from shardsched.store.lua import notify as lua
from shardsched.store.records import decoded_entries
from shardsched.store.redis import Redis

log = logging.getLogger(__name__)

FOLLOW_EVERY_S = 0.5
FOLLOW_STALE_MS = 300_000
READ_COUNT = 1000  #: stream entries read per shard per round
RULES_EVERY_S = 0.5  #: how often the rules are read again (a new rule holds from then)
_rules_decoder = msgspec.json.Decoder(Rule)
_labels_decoder = msgspec.json.Decoder(LabelsOnly)


def _ms(entry_id: str) -> int:
    return int(entry_id.partition("-")[0])


class EventFollower:
    """``held`` answers the (shard, epoch) of every lease held now."""

    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        metrics: Metrics,
        held: Callable[[], list[tuple[int, int]]],
        tracer: RunTracer | None = None,
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics
        self.held = held
        self.tracer = tracer
        self.rules: list[tuple[str, Rule]] = []
        self._rules_read = -1e18  #: trio's clock when the rules were last read
        self._cursors: dict[int, tuple[int, str]] = {}  #: shard -> (epoch, cursor)
        self.matched = 0  #: matches put on the outbox (tests count them)
        self.rounds = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await every(
            FOLLOW_EVERY_S,
            self._counted_round,
            what="following events",
            metrics=self.metrics,
            log=log,
        )

    async def _counted_round(self) -> None:
        await self.round()
        self.rounds += 1

    async def _read_rules(self) -> None:
        if trio.current_time() - self._rules_read < RULES_EVERY_S:
            return
        raw = await self.redis.execute("HGETALL", self.dep.globals.notify.rules)
        rules = [(i, rule) for i, rule in decoded_entries(raw, _rules_decoder) if rule.enabled]
        self.rules = rules
        self._rules_read = trio.current_time()

    async def round(self) -> None:
        await self._read_rules()
        held = dict(self.held())
        if not self.rules and self.tracer is None:
            self._cursors.clear()
            return
        for shard in list(self._cursors):
            if held.get(shard) != self._cursors[shard][0]:
                del self._cursors[shard]
        await self._start([s for s in held if s not in self._cursors], held)
        shards = list(self._cursors)
        calls = [
            ("XRANGE", self.dep.shard(s).events, "(" + self._cursors[s][1], "+", "COUNT",
             READ_COUNT)
            for s in shards
        ]  # fmt: skip
        for shard, entries in zip(shards, await self.redis.pipeline(calls), strict=True):
            if entries:
                await self._follow(shard, entries)

    async def _start(self, shards: list[int], held: dict[int, int]) -> None:
        """Where each newly owned shard's reading starts: its kept cursor, unless that is
        missing or stale; then the stream's end."""
        if not shards:
            return
        now_ms = await self.redis.time_ms()
        kept = await self.redis.pipeline([("GET", self.dep.shard(s).follow_cursor) for s in shards])
        fresh = {}
        for shard, cursor in zip(shards, kept, strict=True):
            if cursor and now_ms - _ms(cursor.decode()) < FOLLOW_STALE_MS:
                fresh[shard] = cursor.decode()
        since = f"{now_ms - RULES_EVERY_S * 2000:.0f}-0"
        for shard in shards:
            self._cursors[shard] = (held[shard], fresh.get(shard) or since)

    async def _follow(self, shard: int, entries: list[Any]) -> None:
        """Note what ``entries`` (the next of ``shard``'s stream) hold, then move on."""
        wanted = {kind for _, rule in self.rules for kind in rule.events}
        notes: list[tuple[str, int, Noted]] = []
        successes: dict[str, str] = {}  #: job -> a run of it that succeeded here
        for entry_id, flat in entries:
            eid = entry_id.decode()
            if self.tracer is not None and (ended := _ended_elsewhere(flat)):
                await self._roots(shard, _ms(eid), ended)
            if not wanted:
                continue
            events = [(flat[i].decode(), flat[i + 1].decode()) for i in range(0, len(flat), 2)]
            found, succeeded = noted(events)
            notes += [(eid, i, n) for i, n in enumerate(found) if n.kind in wanted]
            if Kind.RECOVERED in wanted:
                successes.update(succeeded)
        cursor = entries[-1][0].decode()
        failing = sorted({n.job_id for _, _, n in notes if n.kind in _FAILURES})
        recovered: list[str] = []
        if successes and Kind.RECOVERED in wanted:
            jobs = list(successes)
            member = await self.redis.execute("SMISMEMBER", self.dep.shard(shard).failing, *jobs)
            recovered = [j for j, m in zip(jobs, member, strict=True) if m and j not in failing]
            notes += [
                (cursor, 10_000 + i, Noted(Kind.RECOVERED, successes[j], j, "", ""))
                for i, j in enumerate(recovered)
            ]
        if notes:
            await self._enqueue(shard, notes)
        if Kind.RECOVERED not in wanted:
            failing = []
        epoch = self._cursors[shard][0]
        reply = (
            await redis_calls(
                self.redis,
                [lua.follow_events(self.dep.shard(shard), epoch, cursor, failing, recovered)],
            )
        )[0]
        if reply == 1:
            self._cursors[shard] = (epoch, cursor)
        else:  # not the owner any more (or an error): the next owner reads it again
            self._cursors.pop(shard, None)

    async def _enqueue(self, shard: int, notes: list[tuple[str, int, Noted]]) -> None:
        labels = await self._labels(shard, {n.job_id for _, _, n in notes})
        matches: list[tuple[str, ...]] = []
        for eid, i, n in notes:
            for rule_id, rule in self.rules:
                if n.kind not in rule.events or not rule.covers(n.job_id, labels.get(n.job_id)):
                    continue
                for channel in rule.channels:
                    key = f"{shard}:{eid}:{i}:{rule_id}:{channel}"
                    at = str(_ms(eid))
                    matches.append(
                        (key, rule_id, channel, n.kind, n.rid, n.job_id, at, n.detail, n.worker)
                    )
        for i in range(0, len(matches), 500):
            reply = await redis_calls(
                self.redis, [lua.notify_enqueue(self.dep.globals, matches[i : i + 500])]
            )
            if isinstance(reply[0], Exception):
                raise reply[0]
            self.matched += int(reply[0])

    async def _labels(self, shard: int, jobs: set[str]) -> dict[str, dict[str, str]]:
        """The labels of the jobs (a DAG task's: its DAG's), when a rule asks for labels."""
        if not any(rule.labels for _, rule in self.rules):
            return {}
        owners = {j: j.partition(".")[0] for j in jobs}
        ids = sorted(set(owners.values()))
        sk = self.dep.shard(shard)
        specs = await self.redis.pipeline([("HGET", sk.job(j), "spec") for j in ids])
        found = {}
        for job_id, spec in zip(ids, specs, strict=True):
            try:
                found[job_id] = _labels_decoder.decode(spec).labels if spec else {}
            except msgspec.DecodeError:
                found[job_id] = {}
        return {j: found.get(owner, {}) for j, owner in owners.items()}

    async def _roots(self, shard: int, at_ms: int, events: list[tuple[str, str]]) -> None:
        """Root spans of firings that ended without a worker's completion: a DAG run, a
        run cancelled, a poison run (a worker's applied completion emits its own)."""
        assert self.tracer is not None
        for rid, value in events:
            transition = value.partition("|")[0]
            new = transition.partition(">")[2]
            if new not in ("succeeded", "failed", "cancelled", "dead_letter"):
                continue
            kept = self.tracer.keep.keeps_ended(new)  # a failure's root, sampled or not
            if is_dag_run(rid):
                sampled = self.tracer.samples_firing(rid)
                if not (kept or sampled):
                    continue
                dag_id, tick = parse_dag_run_id(rid)
                if tick.isdigit():
                    start = int(tick)
                else:  # a manual run ('t<n>'): from when it was scheduled, as its tasks
                    key = self.dep.shard(shard).dag_run(rid)
                    scheduled = await self.redis.execute("HGET", key, "s")
                    start = int(scheduled) if scheduled and scheduled.isdigit() else at_ms
                attributes = {"shardsched.dag_run_id": rid, "shardsched.job_id": dag_id}
                if not sampled:
                    attributes["shardsched.kept"] = "failed"
                self.tracer.root(rid, attributes, min(start, at_ms), at_ms, new)
                continue
            poison = new == "failed" and value.endswith("|poison")
            if new != "cancelled" and not poison:
                continue
            try:
                parts = parse_run_id(rid)
            except ValueError:
                continue
            sampled = self.tracer.samples(rid)
            if not (kept or sampled):
                continue
            attributes = {"shardsched.run_id": rid, "shardsched.job_id": parts.job_id}
            if not sampled:
                attributes["shardsched.kept"] = "failed"
            if drid := dag_run_of(rid):
                attributes["shardsched.dag_run_id"] = drid
            start = int(parts.tick) if parts.tick.isdigit() else at_ms
            self.tracer.firing_ended(rid, attributes, min(start, at_ms), at_ms, new)


_FAILURES = (Kind.FAILED, Kind.DEAD_LETTER, Kind.QUARANTINED, Kind.AUTO_PAUSED)


def _ended_elsewhere(flat: list[bytes]) -> list[tuple[str, str]]:
    """The events of an entry that may end a firing no worker completes (a DAG run's, a
    cancellation, a poison run), found on the raw bytes: a burst's entries hold hundreds
    of completions each, which are left undecoded. Most entries hold none, which a look at
    the joined bytes tells 11 times faster than a look at each event: a run id has two colons
    and a DAG run's id one (core/ids: no id holds a colon of its own)."""
    rids = flat[::2]
    values = b"\n".join(flat[1::2]) + b"\n"
    if (
        b"".join(rids).count(b":") == 2 * len(rids)
        and b">cancelled|" not in values
        and b"|poison\n" not in values
    ):
        return []
    return [
        (rid.decode(), value.decode())
        for rid, value in zip(flat[::2], flat[1::2], strict=True)
        if rid.count(b":") == 1 or b">cancelled|" in value or value.endswith(b"|poison")
    ]
