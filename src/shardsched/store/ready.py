"""Waking idle workers with tokens: one LIST of shard numbers per queue, one pop per
waiting worker.

A token says "shard N's ready stream of queue Q may have runs to claim". An idle worker
blocks on the LISTs of the queues it serves (``BLPOP``, in its order) and Redis hands each
token to exactly one waiting worker, the longest waiting first. A worker of another queue
is never woken for runs it may not take. So a firing wakes one worker however large the
fleet, and an idle worker costs Redis nothing but its connection. (Broadcast pub/sub
woke every worker for every firing, and each of them then called claim: O(workers) per
firing.)

Whoever puts runs on a shard's ready stream pushes a token after its script answered:
- the owner, after fire.lua and reclaim.lua (``shard/waker.py``);
- an operation, after trigger, retry, backfill or a DAG trigger;
- a worker, after a completion released DAG tasks or a backfill tick (unless it has a
  free slot: then it claims them itself, as if it had popped the token), or after it
  handed runs back.
A worker whose first claim on a token came back full passes one token on, so more idle
workers join a burst, one hop per claim.
Each script that puts runs on a stream answers which queues got them (lua/lib/queues.lua:
'' when only the default queue did); :func:`woken` reads that answer.

Tokens are hints. A lost one (a worker killed just after its pop, a push that failed)
costs latency, never a run: the owner pushes a token for each shard it holds whose stream
has had undelivered entries and no reader for a check interval (:func:`stuck`). The LIST
is trimmed to :data:`TOKENS_KEPT`, so a fleet that is all busy does not grow it forever.

The commands are here, with no I/O (operations yield them); a process pushes its own
tokens through ``store/token_pusher.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from shardsched.core.queues import DEFAULT_QUEUE
from shardsched.store.calls import Call
from shardsched.store.keys import GlobalKeys, ShardKeys

#: The most tokens the LIST keeps (the newest): enough for every shard many times over.
TOKENS_KEPT = 4096

#: How long an idle worker's BLPOP blocks before it asks again (s).
IDLE_WAIT_S = 30.0


#: A wake: a shard, and a queue as stored ('' the default; core/queues.py).
Wake = tuple[int, str]


def push(g: GlobalKeys, shards: Iterable[int], queues: Iterable[str] = ("",)) -> list[Call]:
    """The commands that push a token for each shard onto each queue's LIST (none for no
    shards or no queues)."""
    return push_wakes(g, [(s, q) for q in queues for s in shards])


def push_wakes(g: GlobalKeys, wakes: Iterable[Wake]) -> list[Call]:
    """The commands that push each (shard, queue) token, one RPUSH and LTRIM per queue."""
    by_queue: dict[str, list[int]] = {}
    for shard, queue in wakes:
        by_queue.setdefault(queue, []).append(shard)
    calls = []
    for queue, tokens in sorted(by_queue.items()):
        key = g.ready_tokens_of(queue)
        calls += [Call(("RPUSH", key, *tokens)), Call(("LTRIM", key, -TOKENS_KEPT, -1))]
    return calls


def woken(reply: bytes | str | int | None, any_runs: bool = True) -> tuple[str, ...]:
    """The queues (as stored) a script's ``queues`` answer names: '' (or 1) is the default
    queue alone when ``any_runs``; else the names, comma-separated, 'default' for ''."""
    if isinstance(reply, bytes):
        reply = reply.decode()
    if not reply or reply == 1:
        return ("",) if any_runs else ()
    if not isinstance(reply, str):
        return ()
    return tuple("" if q == DEFAULT_QUEUE else q for q in reply.split(","))


def undelivered(sk: ShardKeys, queue: str = "") -> list[Call]:
    """Four reads telling whether a queue's stream of the shard holds entries no worker
    has read, or its concurrency keys' streams may (their ring is not empty: a key leaves
    it when a claim finds its stream empty): decode with :func:`decode_undelivered`."""
    stream, ring = sk.ready_of(queue), sk.key_ring(queue)
    return [
        Call(("XLEN", stream)),
        Call(("XINFO", "GROUPS", stream)),
        Call(("LLEN", ring)),
        Call(("LINDEX", ring, 0)),
    ]


def decode_undelivered(replies: Sequence[Any]) -> tuple[int, bytes | None]:
    """How many entries (or keys' streams) wait unread, and what moves when a worker reads
    them: the group's last delivered id (None before the first claim), and the head of
    the keys' ring, which each claim of them turns. Every acknowledged entry is deleted
    (claim, complete, reclaim, release_runs), so the stream's length less the group's
    pending count is the entries not yet read."""
    length, groups, ring_len, ring_head = replies
    if isinstance(length, Exception):
        raise length
    keyed = 0 if isinstance(ring_len, Exception) else int(ring_len)
    head = b"" if isinstance(ring_head, Exception) or ring_head is None else ring_head
    if isinstance(groups, Exception) or not groups:  # no stream, or no group yet
        return int(length) + keyed, (b"|" + head) if keyed else None
    fields = groups[0]
    info = dict(zip(fields[::2], fields[1::2], strict=True))
    waiting = int(length) - int(info[b"pending"]) + keyed
    return waiting, info[b"last-delivered-id"] + b"|" + head


def stuck(now: tuple[int, bytes | None], before: tuple[int, bytes | None] | None) -> bool:
    """Whether a shard needs a token: entries undelivered now, and no worker has read any
    since the last check (``before``; None: not looked at before)."""
    return now[0] > 0 and before is not None and before[0] > 0 and now[1] == before[1]
