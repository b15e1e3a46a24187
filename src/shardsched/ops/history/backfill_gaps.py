"""Which ticks of a window a gap-aware backfill runs: read from the job's ledger (the
audit's own accounting, ops/history/ledger.py), not guessed from the schedule. A tick the ledger
shows missing (no run, no recorded decision), skipped by a recorded policy decision, or
fired and ended badly (its last attempt dead-lettered, or failed with none left) is
picked as the request's ``only`` says; a DST decision (``dst_*``) is the schedule's own
and never a gap."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from shardsched.core.backfill import NO_RUN, Gap
from shardsched.core.instants import to_ms
from shardsched.core.time_views import BackfillTick
from shardsched.ops.history.ledger import Outcome, account, load_history
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment

#: Ticks a backfill's answer lists at the most (the count of all is beside it).
MAX_LISTED = 1000


@dataclass
class Picked:
    runless: list[int] = field(default_factory=list)  #: ticks to run (they have no run)
    failed: list[str] = field(default_factory=list)  #: last attempts to run again
    listed: list[BackfillTick] = field(default_factory=list)


def pick(dep: Deployment, job_id: str, lo: int, hi: int, only: list[Gap] | None) -> Op:
    """The ticks of [lo, hi] the request's ``only`` picks; returns :class:`Picked`."""
    wanted = set(only or NO_RUN)
    history = yield from load_history(dep, job_id)
    (now,) = yield [Call(("TIME",))]
    records = account(history, server_ms(now), lo, hi)
    out = Picked()
    fired: list[tuple[datetime, str]] = []
    for r in records:
        tick = to_ms(r.tick)
        if r.outcome == Outcome.MISSING and Gap.MISSING in wanted:
            out.runless.append(tick)
            out.listed.append(BackfillTick(tick=r.tick, gap=Gap.MISSING))
        elif r.outcome == Outcome.SKIPPED and Gap.SKIPPED in wanted:
            if r.reason is not None and r.reason.startswith("dst_"):
                continue
            out.runless.append(tick)
            out.listed.append(BackfillTick(tick=r.tick, gap=Gap.SKIPPED, reason=r.reason))
        elif r.outcome == Outcome.FIRED and Gap.FAILED in wanted and r.run_id:
            fired.append((r.tick, r.run_id))
    if fired:
        last = yield from last_attempts(dep, [rid for _, rid in fired])
        for when, rid in fired:
            at, state = last[rid]
            if state in ("dead_letter", "failed"):  # its last attempt: failed for good
                out.failed.append(at)
                out.listed.append(BackfillTick(tick=when, gap=Gap.FAILED, run_id=at))
    out.listed.sort(key=lambda t: t.tick)
    return out


def last_attempts(dep: Deployment, rids: list[str]) -> Op:
    """Each run's last attempt and its state, following ``nx`` (one round trip per
    attempt level); returns {first run id: (last run id, state)}. A run gone from Redis
    (archived: it finished) counts as its own last attempt, state ''."""
    out: dict[str, tuple[str, str]] = {}
    current = {rid: rid for rid in rids}
    for _level in range(101):  # attempts are capped at 100
        if not current:
            break
        items = list(current.items())
        replies = yield [Call(("HMGET", dep.keys_for(at).run(at), "st", "nx")) for _, at in items]
        following: dict[str, str] = {}
        for (first, at), fields in zip(items, replies, strict=True):
            state, nx = check(fields)
            if nx is not None:
                following[first] = nx.decode()
            else:
                out[first] = (at, state.decode() if state else "")
        current = following
    return out
