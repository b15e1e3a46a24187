"""Cursor pagination over sorted sets, newest first, across any number of shards.

Lists (jobs, runs, DAGs, dead letters) are ZSETs scored by a time; a page is the next items
in descending (score, member) order strictly after the cursor, merged over every shard's
set. The cursor is that (score, member) pair, opaque to clients; new items never shift
what a cursor points at, so paging while jobs are added neither skips nor repeats.
Equal scores (a bulk registration in one millisecond, the attempts of one tick) are
ordered by member, as Redis orders them, and a page boundary inside such a tie is exact.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass

from shardsched.core.errors import ValidationError
from shardsched.store.calls import Call, Op, check

#: Extra entries fetched per set beyond the page, to get past ties at the cursor's score.
_SLACK = 16
#: A greedy read's entries per set at least: enough to get past a bulk registration's
#: hundreds of jobs in one millisecond, whose ties would otherwise keep each page short.
_GREEDY_PER_SET = 64


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    score: float
    member: bytes

    def encode(self) -> str:
        raw = repr(self.score).encode() + b"|" + self.member
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            score, _, member = raw.partition(b"|")
            value = float(score)
            if not math.isfinite(value):  # nan would make every page a full index scan
                raise ValueError(score)
            return cls(value, member)
        except ValueError:
            raise ValidationError("not a cursor this API gave out", "$.cursor") from None


def parse_cursor(text: str | None) -> Cursor | None:
    return None if not text else Cursor.decode(text)


def _bound(score: float, exclusive: bool = False) -> str:
    if score == float("inf"):
        return "+inf"
    if score == float("-inf"):
        return "-inf"
    text = repr(score)
    return "(" + text if exclusive else text


def zpage(
    keys: Sequence[str],
    after: Cursor | None,
    n: int,
    lo: float = float("-inf"),
    hi: float = float("inf"),
    greedy: bool = False,
) -> Op:
    """The next ``n`` (score, member) of the sets, newest first, with scores in [lo, hi];
    returns (items, next cursor or None when nothing is left).

    ``greedy`` (a filtered scan): read about ``n`` in all, spread over the sets, and
    return every item known to be in order (all above the newest of the sets' last
    items read), which may be more or fewer than ``n``: a scan over many sets then
    reads each entry about once, rather than ``n`` from every set for each ``n`` kept."""
    top = min(hi, after.score) if after else hi
    bound = (after.score, after.member) if after else (0.0, b"")
    per_key = max(_GREEDY_PER_SET, -(-2 * n // max(1, len(keys)))) if greedy else n
    fetch = {key: per_key + _SLACK for key in keys}
    found: dict[str, list[tuple[float, bytes]]] = {}
    fulls: list[str] = []  #: sets with more after what was read
    pending = list(keys)
    while pending:
        replies = yield [
            Call(
                (
                    "ZRANGE",
                    key,
                    _bound(top),
                    _bound(lo),
                    "BYSCORE",
                    "REV",
                    "LIMIT",
                    0,
                    fetch[key],
                    "WITHSCORES",
                )
            )
            for key in pending
        ]
        again = []
        for key, reply in zip(pending, replies, strict=True):
            flat = check(reply)
            items = [(float(flat[i + 1]), flat[i]) for i in range(0, len(flat), 2)]
            full = len(items) == fetch[key]
            if after is not None:  # plain tuples: a Cursor per item costs a scan its time
                items = [it for it in items if it < bound]
            found[key] = items
            if full and len(items) < per_key + 1:  # the fetch was eaten by ties at the cursor
                fetch[key] *= 4
                again.append(key)
            if full:
                fulls.append(key)
        pending = again
    merged = sorted((it for items in found.values() for it in items), reverse=True)
    if greedy:
        lasts = [found[key][-1] for key in fulls if found[key]]
        if not lasts:  # every set read to its end
            return merged, None
        horizon = max(lasts)  # an item not read is below its set's last: below this
        page = [it for it in merged if it >= horizon]
        return page, Cursor(*page[-1])
    page = merged[:n]
    more = len(merged) > n
    return page, (Cursor(*page[-1]) if more and page else None)
