"""Queues and priorities: which workers may run a job, and which of its runs first.

A job (or a DAG task) names a queue; a worker serves a list of them (``shardsched worker
--queues gpu,default``) and claims nothing else. A job has a priority too (high, normal,
low; backfill runs default to low).

Each shard keeps one ready stream per queue and priority (store/keys.py): the default
queue's normal stream is the shard's ``ready`` stream of before queues existed, so a
deployment that names none runs exactly as it did. A stream is named by a queue *as
stored*: the queue's name ('' for the default) and a band suffix ('^h' high, '' normal,
'^l' low). A run records it (``q`` on its record, only when not ''), so its retries,
reclaims and hand-backs stay where it was put even if the job moves.

A worker's claim reads its streams band by band, its queues in its order within a band.
So a higher priority is claimed first, and a lower one is never starved: one claim in
ten (:data:`SHARE`) first takes a tenth of its count from the low band, one from the
normal band, before the strict order.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Annotated

import msgspec

from shardsched.core.errors import ValidationError

DEFAULT_QUEUE = "default"
#: Lower-case letters, digits, '_' and '-': part of Redis key names and metric labels.
QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$(?!\n)")
QueueName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=QUEUE_NAME.pattern)]
#: The most queues one worker serves (each is a stream read in each of its claims).
MAX_WORKER_QUEUES = 16


class Priority(enum.StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


BAND = {Priority.HIGH: "^h", Priority.NORMAL: "", Priority.LOW: "^l"}
_PRIORITY_OF_BAND = {band: p for p, band in BAND.items()}
#: The bands in the order a claim reads them, by the claim's turn (mod 10): in one claim
#: of ten the low band, in another the normal band, first gets a share (a tenth of the
#: count, at least one run) before the strict high, normal, low order.
SHARE = {4: "", 9: "^l"}


@lru_cache(maxsize=4096)
def stored(queue: str, priority: Priority | str = Priority.NORMAL, key: str | None = None) -> str:
    """A queue (and priority) as run records, job hashes and scripts carry it: the name
    ('' for the default), ``@<key>`` for runs of a concurrency key (core/concurrency.py:
    each key's runs have a stream of their own, which the queue's claims take in turn),
    and the band's suffix. Memoised: a bulk registration's jobs mostly share one."""
    name = "" if queue == DEFAULT_QUEUE else queue
    return name + (f"@{key}" if key else "") + BAND[Priority(priority)]


def plain(value: str) -> str:
    """A stored queue without its concurrency key: the queue's stream (and wake tokens)."""
    if "@" not in value:
        return value
    name, _, rest = value.partition("@")
    return name + rest[rest.find("^") :] if "^" in rest else name


def key_of(value: str) -> str | None:
    """The concurrency key of a stored queue (None: none)."""
    return value.partition("@")[2].partition("^")[0] or None


def parse_stored(value: str) -> tuple[str, Priority]:
    """(queue, priority) of a stored queue."""
    name, caret, band = plain(value).partition("^")
    return name or DEFAULT_QUEUE, _PRIORITY_OF_BAND.get(caret + band, Priority.NORMAL)


def streams(queues: Sequence[str], known: Iterable[str] = ()) -> tuple[str, ...]:
    """Every stream a worker serving ``queues`` (names) reads, band by band: the normal
    band's always, a high or low band's when ``known`` (stored queues the shards' jobs
    named) has it."""
    have = set(known)
    out = []
    for band in ("^h", "", "^l"):
        for q in queues:
            s = stored(q) + band
            if not band or s in have:
                out.append(s)
    return tuple(out)


def claim_plan(order: Sequence[str], count: int, turn: int) -> list[tuple[str, int]]:
    """(stream, at most) pairs for one claim of ``count`` over ``order`` (from
    :func:`streams`): the strict order, after the share of this turn's band (SHARE)."""
    plan = [(s, count) for s in order]
    band = SHARE.get(turn % 10)
    if band is not None:
        share = max(1, count // 10)
        first = [(s, share) for s in order if s.endswith(band) and ("^" in s) == bool(band)]
        plan = first + plan if len(first) < len(order) else plan
    return plan


def parse_queues(text: str, field: str = "--queues") -> tuple[str, ...]:
    """``gpu,default`` as ("gpu", "default"): the order is the order a worker claims in."""
    queues: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if not QUEUE_NAME.match(name):
            raise ValidationError(
                f"{name!r} is not a queue name (lower-case letters, digits, '_' and '-', "
                "at most 64, starting with a letter or digit)",
                field,
            )
        if name not in queues:
            queues.append(name)
    if len(queues) > MAX_WORKER_QUEUES:
        raise ValidationError(f"at most {MAX_WORKER_QUEUES} queues per worker", field)
    return tuple(queues)
