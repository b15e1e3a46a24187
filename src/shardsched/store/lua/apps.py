"""Wrappers of a deploy's fencing: announcing a deploy's generation on a shard, and
running an operation with every write it makes fenced by that generation.

A deploy of an app (ops/apps/deploy.py) writes through the very operations a ``PUT`` or
a ``DELETE`` runs; :func:`fenced` sends each of their writes to the script's fenced
variant (store/scripts.py FENCED), which refuses it once a later deploy of the same app
has announced itself on that shard. So two deploys racing cannot interleave their writes:
the later one's announcement ends the earlier one's writes, shard by shard, before the
later one reads what is there."""

from __future__ import annotations

from typing import Any

from shardsched.core.errors import ConflictError, Superseded
from shardsched.store.calls import Call, Op, check
from shardsched.store.keys import ShardKeys
from shardsched.store.lua import signature
from shardsched.store.scripts import FENCED, FENCED_PREFIX

ANNOUNCE_DEPLOY = signature("announce_deploy", keys=("fence",), argv=("generation",))

#: Commands a deploy's operations send besides their fenced scripts: reads only (a write
#: sent any other way would not be fenced, and :func:`fenced` refuses it).
_READS = frozenset(
    {
        "TIME",
        "GET",
        "MGET",
        "EXISTS",
        "HGET",
        "HMGET",
        "HGETALL",
        "HEXISTS",
        "ZSCORE",
        "ZMSCORE",
        "ZRANGE",
        "ZREVRANGE",
        "ZRANGEBYSCORE",
        "ZREVRANGEBYSCORE",
        "ZCARD",
        "LRANGE",
        "LLEN",
        "SMEMBERS",
        "SISMEMBER",
        "XRANGE",
        "XREVRANGE",
        "XLEN",
    }
)


def announce_deploy(sk: ShardKeys, app: str, generation: int) -> Call:
    """Announce the deploy ``generation`` of ``app`` on one shard; reply: the shard's
    fence after it (a later generation: this deploy is superseded)."""
    return ANNOUNCE_DEPLOY.call((sk.app_fence(app),), (generation,))


def _base(key: str) -> str:
    """The shard key base (``ns:{k}:``) a shard's key starts with."""
    at = key.find("}:")
    if at < 0:
        raise RuntimeError(f"a deploy writes only to shards' keys, not {key!r}")
    return key[: at + 2]


def _index_write(call: Call) -> bool:
    """Whether a command writes only the indexes of what runs a job (ops/triggers.py):
    the listeners of an event, the jobs after an upstream, an upstream's mark. Each is a
    superset a delivery checks against the definition, so a superseded deploy's entries
    do no harm: written around the fence."""
    name, key = str(call.args[0]).upper(), str(call.args[1]) if len(call.args) > 1 else ""
    if name in ("SADD", "SREM"):
        return ":{g}:listen:" in key or ":{g}:after:" in key
    if name in ("SET", "DEL"):  # the lock of `after` chains, held milliseconds
        return key.endswith(":{g}:afterlock")
    return name == "HSET" and len(call.args) == 4 and call.args[2] == "ds"


def _fence(call: Call, app: str, generation: int) -> Call:
    if call.script is None:
        name = str(call.args[0]).upper()
        if name not in _READS and not _index_write(call):
            raise RuntimeError(f"a deploy writes only through fenced scripts, not {name}")
        return call
    if call.script not in FENCED:
        raise RuntimeError(f"a deploy writes only through fenced scripts, not {call.script}")
    fence = _base(call.keys[0]) + "appfence:" + app
    return Call(
        (*call.args, generation),
        script=FENCED_PREFIX + call.script,
        keys=(*call.keys, fence),
        refusable=call.refusable,
    )


def fenced(op: Op, app: str, generation: int) -> Op:
    """``op`` with each script it calls sent to its fenced variant for ``app`` at
    ``generation`` (a command other than a read, or a script with no fenced variant,
    raises RuntimeError: it would write around the fence). Raises Superseded, after the
    round in which a write was refused, when a later deploy has announced itself."""
    try:
        calls = next(op)
        while True:
            sent = [_fence(call, app, generation) for call in calls]
            replies: list[Any] = yield sent
            for call, reply in zip(sent, replies, strict=True):
                if call.script is not None and isinstance(reply, Exception):
                    words = str(reply).split()
                    if words[:1] == ["SUPERSEDED"] and int(words[1]) > generation:
                        raise Superseded(app, generation, int(words[1]))
                    if words[:1] == ["SUPERSEDED"]:  # its announcement is gone
                        raise ConflictError(
                            f"the deploy of app {app!r} lost its fence on a shard (a Redis"
                            " restarted without its data?): nothing more was written;"
                            " deploy again"
                        )
            calls = op.send(replies)
    except StopIteration as stop:
        return stop.value


def decode_announced(reply: Any) -> int:
    """The shard's fence after an announcement."""
    return int(check(reply))
