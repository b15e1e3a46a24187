"""What to do with a due timer entry: fire it, skip it, or coalesce a run of late ticks.

Pure: the shard actor calls :func:`decide` for every due job with the server's clock and
turns the :class:`Decision` into one item of the fire script. Skipped ticks are never
dropped silently: the decision carries a compact (first, last, count, reason) record that
the script stores beside the job's runs, where the audit and the ticks API read it.

However long the outage, a decision costs a bounded amount of work: interval ticks are
arithmetic (the timer's score is a tick, so the others are ``score + k * every``), and a
cron schedule's latest tick before now is found by searching windows that double back
from now, never by walking every tick since the outage began. A skip record's ``count`` is
exact up to :data:`COUNT_WALK` cron ticks and estimated from their spacing beyond (it only
feeds the missed-schedule metric; the audit expands a skip's range tick by tick).

A run-once-per-window schedule decides as ``catchup: none`` whose grace is its window:
its tick fires while its window is open, and a window that closed unseen is skipped
(``window_closed``).

``catchup: all`` owes at most ``max_catchup`` ticks: the older ones are recorded skipped
(``catchup_limit``) in one decision, the newest ``max_catchup`` fire one per pass, so one
job's backlog takes one item of each fire batch and never holds up other jobs' ticks.
``catchup: paced`` owes the same ticks but hands them over at once (:attr:`Decision.owed`)
to run as a paced backfill, at most the job's ``catchup_per_minute`` a minute, while its
timer moves on to its next tick after now, which fires on time. A job with named
calendars catches up as under ``all`` instead, so that every owed tick is decided with
its calendars.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shardsched.core.calendars import CALENDAR_SKIP, Calendar, tick_allowed
from shardsched.core.models import (
    Catchup,
    IntervalSchedule,
    Timing,
    WindowSchedule,
    schedule_zone,
)

#: Cron ticks walked exactly when counting a skipped stretch; beyond, estimated.
COUNT_WALK = 256
#: Widest window searched back from now for a cron tick (a yearly schedule fits).
MAX_WINDOW_MS = 5 * 366 * 86_400_000


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
    #: ``catchup: paced``: the (first, last) owed ticks, handed to the owner's pacer as a
    #: paced backfill before the timer moves past them
    owed: tuple[int, int] | None = None


NextAfter = Callable[[int], "int | None"]


class Ticks:
    """The ticks of one schedule from a known tick ``old`` on, with bounded work."""

    def __init__(self, timing: Timing, old: int, next_after: NextAfter) -> None:
        self.old = old
        self.next_after = next_after
        schedule = timing.schedule
        self.every = (
            max(round(schedule.every_s * 1000), 1)
            if isinstance(schedule, IntervalSchedule)
            else None
        )

    def at_or_after(self, t: int) -> int | None:
        """The first tick >= ``t`` (``t`` >= old)."""
        if t <= self.old:
            return self.old
        if self.every is not None:
            return self.old + -(-(t - self.old) // self.every) * self.every
        return self.next_after(t - 1)

    def latest(self, t: int) -> int:
        """The latest tick <= ``t`` (``old`` <= ``t``)."""
        if self.every is not None:
            return self.old + (t - self.old) // self.every * self.every
        window = 60_000
        while True:
            start = max(self.old, t - window)
            tick = self.at_or_after(start)
            if tick is not None and tick <= t:
                while (following := self.next_after(tick)) is not None and following <= t:
                    tick = following
                return tick
            if start == self.old or window >= MAX_WINDOW_MS:
                return self.old
            window *= 2

    def back(self, t: int, n: int) -> int:
        """The ``n``-th latest tick <= ``t`` (1: the latest), or ``old`` if there are fewer."""
        if self.every is not None:
            return max(self.old, self.latest(t) - (n - 1) * self.every)
        window = 60_000
        while True:
            start = max(self.old, t - window)
            ticks = self._walk(start, t, limit=None)
            if len(ticks) >= n:
                return ticks[-n]
            if start == self.old or window >= MAX_WINDOW_MS:
                return self.old
            window *= 2

    def _walk(self, lo: int, hi: int, limit: int | None) -> list[int]:
        """Ticks in [lo, hi], in order (at most ``limit``)."""
        out: list[int] = []
        tick = self.at_or_after(lo)
        while tick is not None and tick <= hi and (limit is None or len(out) < limit):
            out.append(tick)
            tick = self.next_after(tick)
        return out

    def count(self, lo: int, hi: int) -> int:
        """How many ticks lie in [lo, hi] (``lo`` a tick): exact for intervals and up to
        COUNT_WALK cron ticks, estimated from their spacing beyond."""
        if hi < lo:
            return 0
        if self.every is not None:
            return (hi - lo) // self.every + 1
        walked = self._walk(lo, hi, COUNT_WALK + 1)
        if len(walked) <= COUNT_WALK or walked[-1] == walked[0]:
            return len(walked)
        spacing = (walked[-1] - walked[0]) / (len(walked) - 1)
        return len(walked) + round((hi - walked[-1]) / spacing)


def decide(timing: Timing, old: int, now: int, next_after: NextAfter) -> Decision:
    """Decide for a job whose timer entry ``old`` is due, or about to be: the actor plans a
    batch up to its lookahead before the tick, so ``old`` may be a little after ``now``
    (it then fires as it is, on its tick)."""
    now = max(now, old)
    ticks = Ticks(timing, old, next_after)
    policy = timing.catchup
    if policy == Catchup.PACED and timing.calendars is not None:
        # a backfill does not look at calendars: owed ticks are fired one per pass as
        # under ``all``, each decided with the calendars (core/calendars.py)
        policy = Catchup.ALL
    window = timing.schedule if isinstance(timing.schedule, WindowSchedule) else None
    if policy == Catchup.NONE or window is not None:
        # a window's tick fires while its window is open, whatever the policy
        grace_ms = round((window.duration_s if window else timing.misfire_grace_s) * 1000)
        if now - old <= grace_ms:
            return Decision(old, next_after(old))
        # Skip every tick later than the grace; the first one inside it (or in the
        # future) becomes the timer entry and fires normally.
        kept = ticks.at_or_after(now - grace_ms)
        last = ticks.latest(now - grace_ms - 1) if kept is None or kept > old else old
        reason = "window_closed" if window else "misfire"
        return Decision(None, kept, Skip(old, last, ticks.count(old, last), reason))
    if policy == Catchup.PACED:
        if now - old <= round(timing.misfire_grace_s * 1000):
            return Decision(old, next_after(old))
        latest = ticks.latest(now)
        keep_from = ticks.back(now, max(timing.max_catchup, 1))
        skip = None
        if keep_from > old:  # more than max_catchup owed: skip the oldest, in one record
            last_skipped = ticks.back(keep_from - 1, 1)
            skip = Skip(old, last_skipped, ticks.count(old, last_skipped), "catchup_limit")
        return Decision(None, next_after(latest), skip, (keep_from, latest))
    if policy == Catchup.ALL:
        limit = max(timing.max_catchup, 1)
        keep_from = ticks.back(now, limit)
        if keep_from > old:  # more than max_catchup owed: skip the oldest, in one record
            last_skipped = ticks.back(keep_from - 1, 1)
            skip = Skip(old, last_skipped, ticks.count(old, last_skipped), "catchup_limit")
            return Decision(None, keep_from, skip)
        return Decision(old, next_after(old))
    # LATEST: of the ticks due now, fire the last and record the others skipped.
    latest = ticks.latest(now)
    if latest == old:
        return Decision(old, next_after(old))
    prev = ticks.back(now, 2)
    return Decision(
        latest, next_after(latest), Skip(old, prev, ticks.count(old, prev), "catchup_latest")
    )


def on_calendar(decision: Decision, timing: Timing, book: Mapping[str, Calendar]) -> Decision:
    """The decision with the job's calendars applied (core/calendars.py): a tick it fires
    on a day the rule does not allow is skipped instead (``calendar``), the timer moving
    on as it would have. A decision that already skips older ticks (a catch-up) keeps its
    skip and leaves the tick to the next pass, which skips it for the calendar then."""
    tick, rule = decision.fire, timing.calendars
    if rule is None or tick is None or tick_allowed(rule, book, tick, zone_of(timing)):
        return decision
    if decision.skip is not None:
        return Decision(None, tick, decision.skip)
    return Decision(None, decision.new, Skip(tick, tick, 1, CALENDAR_SKIP))


def zone_of(timing: Timing) -> str:
    """The time zone whose dates a calendar is read in: the schedule's wall clock, UTC
    for an interval or a one-off."""
    return schedule_zone(timing.schedule)
