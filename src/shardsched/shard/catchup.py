"""What to do with a due timer entry: fire it, skip it, or coalesce a run of late ticks.

Pure: the shard actor calls :func:`decide` for every due job with the server's clock and
turns the :class:`Decision` into one item of the fire script. Skipped ticks are never
dropped silently: the decision carries a compact (first, last, count, reason) record that
the script stores beside the job's runs, where the audit and the ticks API read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shardsched.models import Catchup, Timing

#: Bound on ticks walked for one decision (a 1-second job after a very long outage).
MAX_WALK = 1_000_000


@dataclass(frozen=True, slots=True)
class Skip:
    first: int
    last: int
    count: int
    reason: str

    def encode(self) -> str:
        return f"{self.first}:{self.last}:{self.count}:{self.reason}"

    @classmethod
    def decode(cls, raw: str) -> Skip:
        first, last, count, reason = raw.split(":", 3)
        return cls(int(first), int(last), int(count), reason)


@dataclass(frozen=True, slots=True)
class Decision:
    fire: int | None  #: the tick to fire now, if any
    new: int | None  #: the timer's next score; None removes the entry (schedule exhausted)
    skip: Skip | None = None


def decide(timing: Timing, old: int, now: int, next_after: Callable[[int], int | None]) -> Decision:
    """Decide for a job whose timer entry ``old`` is due (``old <= now``)."""
    policy = timing.catchup
    if policy == Catchup.ALL:
        return Decision(old, next_after(old))
    if policy == Catchup.NONE:
        grace_ms = round(timing.misfire_grace_s * 1000)
        if now - old <= grace_ms:
            return Decision(old, next_after(old))
        # Skip every tick later than the grace; the first one inside it (or in the
        # future) becomes the timer entry and fires normally.
        tick: int | None = old
        last, count = old, 0
        while tick is not None and now - tick > grace_ms and count < MAX_WALK:
            last, count = tick, count + 1
            tick = next_after(tick)
        return Decision(None, tick, Skip(old, last, count, "misfire"))
    # LATEST: of the ticks due now, fire the last and record the others skipped.
    prev, latest = None, old
    count = 0
    while count < MAX_WALK:
        following = next_after(latest)
        if following is None or following > now:
            break
        prev, latest = latest, following
        count += 1
    if prev is None:
        return Decision(old, next_after(old))
    return Decision(latest, next_after(latest), Skip(old, prev, count, "catchup_latest"))
