"""Wrappers of the run scripts a worker (or the router's worker protocol) and the shard
owner call: claim, take up pending, renew, complete, hand back, reclaim, retry."""

from __future__ import annotations

import enum
import secrets
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from shardsched.core.ids import parse_run_id
from shardsched.store.calls import Call
from shardsched.store.keys import CONSUMER_GROUP, GlobalKeys, ShardKeys
from shardsched.store.lua import signature
from shardsched.store.ready import woken
from shardsched.store.records import OUTPUT_LIMIT


class ClaimedEntry(NamedTuple):
    """One run delivered to a worker, as claim.lua and pending_runs.lua answer it (a
    NamedTuple: built for every run of a burst, it must be cheap)."""

    entry_id: str
    run_id: str
    spec_json: bytes  #: the job's (or DAG task's) spec, b"" when it is gone
    scheduled_ms: int
    attempt: int
    token: int  #: the delivery token: which delivery of this run the worker holds
    lease_ms: int  #: the lease deadline (server clock)
    now_ms: int  #: the server's clock at the claim
    args_json: bytes  #: the run's own args (a trigger's, a DAG run's), b"": the job's


def decode_claimed(reply: Sequence[Any]) -> list[ClaimedEntry]:
    """The runs of a claim or pending_runs reply (9 fields each)."""
    out = []
    for i in range(0, len(reply), 9):
        run_id = reply[i + 1].decode()
        _, tick, attempt = parse_run_id(run_id)
        out.append(
            ClaimedEntry(
                reply[i].decode(),
                run_id,
                reply[i + 2] or b"",
                int(reply[i + 3] or tick),  # a manual run's tick is its 's' (scheduled_for)
                int(reply[i + 4] or attempt),
                int(reply[i + 5]),
                int(reply[i + 6]),
                int(reply[i + 7]),
                reply[i + 8] or b"",
            )
        )
    return out


CLAIM = signature(
    "claim",
    keys=("ready", "reclaim_at"),
    argv=("base", "group", "worker", "count", "wake channel", "shard", "nonce"),
    item=("queue", "at most"),
)


def _queue_items(queues: Sequence[str]) -> tuple[str, ...]:
    """The queues pending_runs names (as stored): none when only the default is served."""
    return () if tuple(queues) == ("",) else tuple(queues)


def claim(
    sk: ShardKeys,
    g: GlobalKeys,
    worker_id: str,
    count: int,
    queues: Sequence[str] | Sequence[tuple[str, int]] = ("",),
) -> Call:
    """Claim up to ``count`` fired runs of one shard from the streams of ``queues`` (as
    stored, in the order given; each with the most to take from it, or ``count``: see
    core/queues.claim_plan); decode with :func:`decode_claimed`.
    A lease earlier than any the owner knows of is published to it (:func:`reclaim_hint`).
    Each call carries a fresh random number: the delivery tokens it hands out cannot be
    guessed (only the claimer learns them)."""
    return CLAIM.call(
        (sk.ready, sk.reclaim_at),
        (
            sk.base,
            CONSUMER_GROUP,
            worker_id,
            count,
            g.wake_channel,
            sk.shard,
            secrets.randbits(31),
        ),
        _claim_items(queues, count),
    )


def _claim_items(queues: Sequence[str] | Sequence[tuple[str, int]], count: int) -> list[Any]:
    """claim.lua's items: none when the default stream alone is read, in full, so a
    deployment without queues claims as it always did."""
    pairs = [(q, count) if isinstance(q, str) else q for q in queues]
    if pairs == [("", count)]:
        return []
    return [x for pair in pairs for x in pair]


def reclaim_hint(message: bytes) -> tuple[int, int] | None:
    """(shard, ms) of a wake-channel message ``r<shard>:<ms>`` (claim.lua: the shard's
    earliest lease deadline is now ``ms``); None for any other message."""
    if not message.startswith(b"r"):
        return None
    shard, _, at = message[1:].partition(b":")
    return int(shard), int(at)


PENDING_RUNS = signature(
    "pending_runs", keys=("ready",), argv=("group", "worker", "base", "count"), item=("queue",)
)


def pending_runs(
    sk: ShardKeys, worker_id: str, count: int = 1000, queues: Sequence[str] = ("",)
) -> Call:
    """The runs still delivered to this worker id on the streams of ``queues``; decode
    with :func:`decode_claimed`."""
    return PENDING_RUNS.call(
        (sk.ready,), (CONSUMER_GROUP, worker_id, sk.base, count), _queue_items(queues)
    )


class Held(enum.IntEnum):
    """Per-run codes of renew_runs and complete."""

    APPLIED = 1
    ALREADY_APPLIED = 0  #: complete: this very completion was applied before (a replay)
    NO_SUCH_RUN = -1
    NOT_HELD = -2  #: the caller no longer holds the run (recorded on the run)
    CANCELLED = -3  #: renew: the run was cancelled; the worker must stop it


class Delivery(NamedTuple):
    """Which delivery of a run a worker holds: its stream entry and delivery token."""

    entry_id: str
    run_id: str
    token: int


def _flat(deliveries: Iterable[Delivery]) -> list[Any]:
    out: list[Any] = []
    for d in deliveries:
        out += (d.entry_id, d.run_id, d.token)
    return out


RENEW_RUNS = signature(
    "renew_runs",
    keys=("ready",),
    argv=("group", "worker", "base"),
    item=("entry id", "run id", "delivery token"),
)


def renew_runs(sk: ShardKeys, worker_id: str, runs: Iterable[Delivery]) -> Call:
    """Extend the leases of runs of one shard; decode with :func:`decode_renewed`."""
    return RENEW_RUNS.call((sk.ready,), (CONSUMER_GROUP, worker_id, sk.base), _flat(runs))


def decode_renewed(reply: Sequence[Any]) -> list[tuple[Held, int]]:
    """(code, new lease deadline ms) per run, in the order sent."""
    return [
        (Held(int(code)), int(lease)) for code, lease in zip(reply[1::2], reply[2::2], strict=True)
    ]


class Completion(NamedTuple):
    """One run's outcome for complete.lua."""

    delivery: Delivery
    state: str  #: succeeded | failed | dead_letter
    exit_code: int | None
    reason: str
    output: bytes
    started_ms: int | None  #: execution start on the server's clock (None: unknown)
    retry_at: int | str  #: the next attempt's due time (ms), "" for none
    output_total: int | None = None  #: bytes printed in all (output is their tail)


#: Output kept in Redis by default, over all of a job's runs and over the deployment.
DEFAULT_JOB_OUTPUT_QUOTA = 64 * 1024 * 1024
DEFAULT_OUTPUT_QUOTA = 1024 * 1024 * 1024


class OutputQuota(NamedTuple):
    """Bytes of output Redis keeps at most (lib/outquota.lua): over all runs of one job,
    and over one shard (its share of the deployment's quota), 0 for no quota; and of each
    run, the tail its worker keeps and sends (``run``)."""

    job: int = 0
    shard: int = 0
    run: int = OUTPUT_LIMIT

    @classmethod
    def of(cls, job: int, deployment: int, n_shards: int, run: int = OUTPUT_LIMIT) -> OutputQuota:
        return cls(job, max(deployment // max(n_shards, 1), 1) if deployment else 0, run)


UNLIMITED = OutputQuota()


class OutputChunk(NamedTuple):
    """What a running command printed since the last flush, for flush_output.lua."""

    delivery: Delivery
    total: int  #: bytes printed in all so far
    append: bool  #: ``data`` follows what was written before; else it is the whole tail
    data: bytes


FLUSH_OUTPUT = signature(
    "flush_output",
    keys=("ready",),
    argv=("group", "worker", "base", "job output quota", "shard output quota"),
    item=("entry id", "run id", "delivery token", "total", "mode", "bytes"),
)


def flush_output(
    sk: ShardKeys,
    worker_id: str,
    chunks: Iterable[OutputChunk],
    quota: OutputQuota = UNLIMITED,
) -> Call:
    """Write running commands' output so far, within ``quota``; reply a code per chunk
    (1 | -2 not held)."""
    items: list[Any] = []
    for c in chunks:
        d = c.delivery
        items += (d.entry_id, d.run_id, d.token, c.total, "a" if c.append else "s", c.data)
    argv = (CONSUMER_GROUP, worker_id, sk.base, quota.job, quota.shard)
    return FLUSH_OUTPUT.call((sk.ready,), argv, items)


def decode_flushed(reply: Sequence[Any]) -> list[bool]:
    """Per chunk, in the order sent: written (False: the worker no longer holds the run)."""
    return [int(code) == 1 for code in reply]


COMPLETE = signature(
    "complete",
    keys=("ready", "retries", "deadletter", "autopause"),
    argv=(
        "group",
        "worker",
        "base",
        "wake channel",
        "shard",
        "job output quota",
        "shard output quota",
    ),
    item=(
        "entry id",
        "run id",
        "delivery token",
        "state",
        "exit code",
        "reason",
        "output",
        "started",
        "retry at",
        "output total",
    ),
)


def complete(
    sk: ShardKeys,
    g: GlobalKeys,
    worker_id: str,
    completions: Iterable[Completion],
    quota: OutputQuota = UNLIMITED,
) -> Call:
    """Report outcomes of runs of one shard, their output kept within ``quota``; decode
    with :func:`decode_completed`."""
    items: list[Any] = []
    for c in completions:
        d = c.delivery
        items += (
            d.entry_id,
            d.run_id,
            d.token,
            c.state,
            "" if c.exit_code is None else c.exit_code,
            c.reason,
            c.output,
            "" if c.started_ms is None else c.started_ms,
            c.retry_at,
            "" if c.output_total is None else c.output_total,
        )
    return COMPLETE.call(
        (sk.ready, sk.retries, sk.dead_letter, sk.autopause),
        (CONSUMER_GROUP, worker_id, sk.base, g.wake_channel, sk.shard, quota.job, quota.shard),
        items,
    )


class Completed(NamedTuple):
    now_ms: int  #: the server's clock
    released: bool  #: a DAG task or backfill tick went to a ready stream: wake a worker
    codes: list[Held]  #: one per completion, in the order sent
    queues: tuple[str, ...] = ()  #: the queues they went to (store/ready.py)


def decode_completed(reply: Sequence[Any]) -> Completed:
    """The server's clock, whether anything was released (and onto which queues), and a
    code per completion."""
    released = reply[1] != 0
    return Completed(
        int(reply[0]),
        released,
        [Held(int(code)) for code in reply[2:]],
        woken(reply[1]) if released else (),
    )


RELEASE_RUNS = signature(
    "release_runs",
    keys=("ready",),
    argv=("group", "worker", "base"),
    item=("entry id", "run id", "delivery token"),
)


def release_runs(sk: ShardKeys, worker_id: str, runs: Iterable[Delivery]) -> Call:
    """Hand runs back at once (a draining worker); reply {how many were, their queues}
    (store/ready.py)."""
    return RELEASE_RUNS.call((sk.ready,), (CONSUMER_GROUP, worker_id, sk.base), _flat(runs))


class Fenced(enum.IntEnum):
    """The first field of an owner script's reply."""

    OK = 1
    STALE_EPOCH = -1  #: the caller's epoch is not the shard's: it lost its lease
