"""The deployment's notification dispatcher: groups the matches the owners put on the
outbox (shard/follower.py) into messages, holds each channel to its rate, and delivers
every message at least once, recording each attempt.

Every node runs one; the node holding a short lease (lua/notify_lease.lua) does the
work, so grouping and rate limits are deployment-wide. Matches of one (rule, channel)
wait up to the rule's ``group_s`` for company, then become one message; a channel out of
its ``max_per_minute`` lets its groups grow until it has room, so 25,000 failures in a
second make a handful of messages, not 25,000. A message is kept before its matches
leave the outbox (lua/notify_compose.lua) and goes on being retried with backoff until
delivered or out of attempts (lua/notify_attempted.lua); a new holder reads the outbox's
pending matches again and delivers what is due. Nothing here blocks firing: this task
only reads the owners' output.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from shardsched.core.errors import ShardschedError
from shardsched.core.notify import Channel, Kind, Rule
from shardsched.core.notify_text import DETAILED, compose
from shardsched.runtime.metrics import Metrics
from shardsched.shard import channels as send
from shardsched.store.deployment import Deployment
from shardsched.store.drive import drive_async, redis_calls
from shardsched.store.lua import notify as lua
from shardsched.store.notify_items import enrich, items_of
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)

LEASE_TTL_MS = 10_000
ROUND_S = 0.25
CONFIG_EVERY_S = 2.0
SENDING_AT_ONCE = 8
MESSAGES_KEPT = 10_000  #: delivery records kept (the oldest go first)
ACK_CHUNK = 5000
_channel_decoder = msgspec.json.Decoder(Channel)
_rule_decoder = msgspec.json.Decoder(Rule)


@dataclass
class Group:
    opened: float  #: trio's clock at its first match
    entries: list[tuple[str, dict[str, str]]] = field(default_factory=list)


class Bucket:
    """A channel's messages per minute: a token bucket full at the start."""

    def __init__(self, per_minute: int, now: float) -> None:
        self.per_minute = per_minute
        self.tokens = float(per_minute)
        self.at = now

    def take(self, now: float) -> bool:
        self.tokens = min(self.per_minute, self.tokens + (now - self.at) * self.per_minute / 60)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class Dispatcher:
    def __init__(
        self,
        redis: Redis,
        dep: Deployment,
        metrics: Metrics,
        node_id: str,
        public_url: str | None = None,
    ) -> None:
        self.redis = redis
        self.dep = dep
        self.g = dep.globals
        self.metrics = metrics
        self.node_id = node_id
        #: where the console is served, for links in messages (default from the environment)
        public_url = public_url or os.environ.get("SHARDSCHED_PUBLIC_URL")
        self.public_url = public_url.rstrip("/") if public_url else None
        self.holding = False
        self._lease_at = -math.inf
        #: a new holder reads the outbox's pending matches first, from this entry on
        self._pending_from: str | None = "0"
        self.groups: dict[tuple[str, str], Group] = {}
        self.buckets: dict[str, Bucket] = {}
        self.channels: dict[str, Channel] = {}
        self.rules: dict[str, Rule] = {}
        self._config_at = -math.inf
        self._sending: set[str] = set()
        self.composed = 0
        self.attempts = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    await self.round(nursery)
                except (RedisError, ShardschedError) as exc:
                    self.metrics.redis_error(log, "notification dispatch", exc, 1.0)
                    await trio.sleep(1.0)
                await trio.sleep(ROUND_S)

    async def round(self, nursery: trio.Nursery) -> None:
        now = trio.current_time()
        if now - self._lease_at >= LEASE_TTL_MS / 3000:
            await self._keep_lease()
        if not self.holding:
            return
        if now - self._config_at >= CONFIG_EVERY_S:
            await self._read_config()
        await self._read_outbox()
        await self._compose_ready()
        await self._deliver_due(nursery)

    async def _keep_lease(self) -> None:
        (reply,) = await redis_calls(
            self.redis, [lua.notify_lease(self.g, self.node_id, LEASE_TTL_MS)]
        )
        held = reply == 1
        if held and not self.holding:
            log.info("node %s dispatches notifications", self.node_id)
            self._pending_from = "0"
            self.groups.clear()
            self._config_at = -math.inf
            try:
                await self.redis.execute(
                    "XGROUP", "CREATE", self.g.notify.outbox, lua.DISPATCH_GROUP, "0", "MKSTREAM"
                )
            except RedisError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self.holding = held
        self._lease_at = trio.current_time()

    async def _read_config(self) -> None:
        raw_channels, raw_rules = await self.redis.pipeline(
            [("HGETALL", self.g.notify.channels), ("HGETALL", self.g.notify.rules)]
        )
        self.channels = dict(_decoded(raw_channels, _channel_decoder))
        self.rules = dict(_decoded(raw_rules, _rule_decoder))
        self._config_at = trio.current_time()

    async def _read_outbox(self) -> None:
        if not await self.redis.execute("XLEN", self.g.notify.outbox):
            return  # nothing noted (an idle deployment reads no more than this)
        start = self._pending_from or ">"
        reply = await self.redis.execute(
            "XREADGROUP", "GROUP", lua.DISPATCH_GROUP, "d", "COUNT", 5000,
            "STREAMS", self.g.notify.outbox, start,
        )  # fmt: skip
        entries = reply[0][1] if reply else []
        if self._pending_from is not None:
            self._pending_from = entries[-1][0].decode() if len(entries) == 5000 else None
        now = trio.current_time()
        stale: list[str] = []
        if any(_unknown(flat, self.rules, self.channels) for _, flat in entries):
            await self._read_config()  # made since the last read: not stale
        for entry_id, flat in entries:
            if flat is None:  # deleted while pending
                continue
            eid = entry_id.decode()
            fields = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
            key = (fields.get("r", ""), fields.get("c", ""))
            if key[0] not in self.rules or key[1] not in self.channels:
                stale.append(eid)  # its rule or channel was deleted: nobody to tell
                continue
            group = self.groups.get(key)
            if group is None:
                group = self.groups[key] = Group(now)
            group.entries.append((eid, fields))
        await self._drop(stale)

    async def _drop(self, entries: list[str]) -> None:
        """Take matches no rule or channel wants any more off the outbox."""
        for i in range(0, len(entries), ACK_CHUNK):
            chunk = entries[i : i + ACK_CHUNK]
            await self.redis.pipeline(
                [
                    ("XACK", self.g.notify.outbox, lua.DISPATCH_GROUP, *chunk),
                    ("XDEL", self.g.notify.outbox, *chunk),
                ]
            )

    async def _compose_ready(self) -> None:
        now = trio.current_time()
        for key, group in list(self.groups.items()):
            rule_id, channel_name = key
            rule, channel = self.rules.get(rule_id), self.channels.get(channel_name)
            if rule is None or channel is None:  # deleted meanwhile: nobody to tell
                del self.groups[key]
                await self._drop([eid for eid, _ in group.entries])
                continue
            if now - group.opened < rule.group_s:
                continue
            bucket = self.buckets.get(channel_name)
            if bucket is None or bucket.per_minute != channel.max_per_minute:
                bucket = self.buckets[channel_name] = Bucket(channel.max_per_minute, now)
            if not bucket.take(now):
                continue  # out of its rate: the group grows until there is room
            await self._compose(rule_id, channel_name, group)
            del self.groups[key]

    async def _compose(self, rule_id: str, channel: str, group: Group) -> None:
        first_key = group.entries[0][1].get("k", group.entries[0][0])
        msg_id = hashlib.sha1(f"{first_key}|{channel}".encode()).hexdigest()[:20]
        items = items_of([f for _, f in group.entries])
        detailed = await drive_async(
            enrich(self.dep, items[:DETAILED], self.public_url), self.redis
        )
        doc = compose(msg_id, rule_id, detailed + items[DETAILED:], len(items))
        body = msgspec.json.encode(doc)
        ids = [eid for eid, _ in group.entries]
        for i in range(0, max(len(ids), 1), ACK_CHUNK):
            call = lua.notify_compose(
                self.g, msg_id, channel, rule_id, body, ids[i : i + ACK_CHUNK]
            )
            (reply,) = await redis_calls(self.redis, [call])
            if isinstance(reply, Exception):
                raise reply
        self.composed += 1
        kinds = {Kind(f["n"]) for _, f in group.entries if f.get("n") in Kind._value2member_map_}
        log.info(
            "notification %s: %d match(es) (%s) for channel %s",
            msg_id,
            len(ids),
            ", ".join(sorted(kinds)),
            channel,
        )

    async def _deliver_due(self, nursery: trio.Nursery) -> None:
        now_ms = await self.redis.time_ms()
        due = await self.redis.execute(
            "ZRANGE", self.g.notify.due, "-inf", now_ms, "BYSCORE", "LIMIT", 0, 50
        )
        for raw in due:
            msg_id = raw.decode()
            if msg_id in self._sending or len(self._sending) >= SENDING_AT_ONCE:
                continue
            self._sending.add(msg_id)
            nursery.start_soon(self._deliver, msg_id)
        await self._trim(now_ms)

    async def _deliver(self, msg_id: str) -> None:
        try:
            fields = await self.redis.execute("HGETALL", self.g.notify.message(msg_id))
            msg = {fields[i].decode(): fields[i + 1] for i in range(0, len(fields), 2)}
            name = msg.get("ch", b"").decode()
            if name not in self.channels:
                await self._read_config()  # made since the last read?
            channel = self.channels.get(name)
            if channel is None:
                await self._attempted(msg_id, "failed", "its channel was deleted", 0, 0)
                return
            attempt = int(msg.get("n", b"0")) + 1
            body = msg.get("body", b"{}")
            started = trio.current_time()
            sent = await send.send(channel, msg_id, attempt, body, msgspec.json.decode(body))
            took_ms = round((trio.current_time() - started) * 1000)
            if sent.answer == send.UNREACHED:  # how long says what the port did: not said
                took_ms = 0
            self.attempts += 1
            if sent.ok:
                await self._attempted(msg_id, "delivered", sent.answer, took_ms, 0)
            elif sent.retry and attempt < channel.max_attempts:
                after_ms = round(channel.retry_after_s(attempt) * 1000)
                next_ms = await self.redis.time_ms() + after_ms
                await self._attempted(msg_id, "retry", sent.answer, took_ms, next_ms)
            else:
                await self._attempted(msg_id, "failed", sent.answer, took_ms, 0)
                log.warning("notification %s not delivered: %s", msg_id, sent.answer)
        except (RedisError, ShardschedError) as exc:
            self.metrics.redis_error(log, f"delivering notification {msg_id}", exc, 0)
        finally:
            self._sending.discard(msg_id)

    async def _attempted(
        self, msg_id: str, outcome: str, answer: str, took_ms: int, next_ms: int
    ) -> None:
        call = lua.notify_attempted(self.g, msg_id, outcome, answer, took_ms, next_ms)
        (reply,) = await redis_calls(self.redis, [call])
        if isinstance(reply, Exception):
            raise reply
        self.metrics.notifications.labels(outcome).inc()

    async def _trim(self, now_ms: int) -> None:
        """Delivery records beyond MESSAGES_KEPT go, oldest first (not one still due)."""
        count = await self.redis.execute("ZCARD", self.g.notify.messages)
        if count <= MESSAGES_KEPT:
            return
        old = await self.redis.execute(
            "ZRANGE", self.g.notify.messages, 0, count - MESSAGES_KEPT - 1
        )
        ids = [o.decode() for o in old]
        commands: list[tuple[Any, ...]] = [("ZREM", self.g.notify.messages, *ids)]
        commands += [("ZREM", self.g.notify.due, *ids)]
        commands += [("DEL", self.g.notify.message(i), self.g.notify.attempts(i)) for i in ids]
        await self.redis.pipeline(commands)


def _unknown(
    flat: list[bytes] | None, rules: dict[str, Rule], channels: dict[str, Channel]
) -> bool:
    """Whether an outbox entry names a rule or channel not read (yet)."""
    if not flat:
        return False
    fields = dict(zip(flat[::2], flat[1::2], strict=True))
    return (
        fields.get(b"r", b"").decode() not in rules
        or fields.get(b"c", b"").decode() not in channels
    )


def _decoded(raw: list[Any], decoder: msgspec.json.Decoder[Any]) -> Iterator[tuple[str, Any]]:
    for i in range(0, len(raw or []), 2):
        try:
            yield raw[i].decode(), decoder.decode(raw[i + 1])
        except msgspec.DecodeError:
            continue
