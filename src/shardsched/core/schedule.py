"""Next-fire arithmetic: pure functions over schedules, no I/O.

A cron expression is matched on the *wall clock* of the job's time zone (the grammar and
the match are core/cron.py's); the mapping from a matching wall time to instants is
core/dst.py's, because that is where DST bites. The default rule (docs/concepts.md says
it to users, with how it differs from Vixie/Debian cron, croniter and Kubernetes):

* **Spring forward (a wall time that does not exist).** A job whose hour field starts
  with ``*`` (``*``, ``*/n``: a *wildcard* job) has no firing in the missing hour:
  "0 * * * *" in America/New_York fires at 01:00 EST and next at 03:00 EDT. Any other
  job fires each match of the gap shifted forward by the gap's size, in order: "30 2 * *
  *" in Europe/Berlin at 03:30 CEST, "0,30 2 * * *" in New York at 03:00 and 03:30 EDT;
  one landing on a time that fires anyway is one tick.
* **Fall back (a wall time that happens twice).** A wildcard job fires at both
  occurrences, any other at the first only.

A schedule's ``dst`` policy sets either half (``gap: shift | end | skip``, ``repeat:
first | second | both``), and the ``debian`` dialect reproduces Debian cron (a gap's
matches fire once, at its end; wildcard means minute *or* hour field starting with
``*``). Every wall time that does not fire is a recorded decision, never a silence
(core/dst.py). ``core/cron_reference.py`` is the slow model all of this is tested against.

Everything is in integer milliseconds since the epoch (the Redis server's clock), and a
memo keyed by (schedule, previous fire) makes 25,000 jobs on the same expression cost one
computation.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from shardsched.core.cron import CronDialect, CronFields, next_match
from shardsched.core.cron import parse as _parse
from shardsched.core.dst import REACH, classify, dst_rule, offset_range, zone_info
from shardsched.core.dst_policy import DstPolicy
from shardsched.core.instants import MAX_MS, from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import (
    CronSchedule,
    IntervalSchedule,
    MultiSchedule,
    OnceSchedule,
    Schedule,
    Timing,
    TriggeredSchedule,
    WindowSchedule,
)


def parse_cron(
    expression: str, dialect: CronDialect | msgspec.UnsetType = msgspec.UNSET
) -> CronFields:
    """The parsed expression (core/cron.py); raises ValueError naming the field at fault,
    or if it never fires (``0 0 30 2 *``: February 30th)."""
    return _parse(expression, CronDialect.SHARDSCHED if dialect is msgspec.UNSET else dialect)


def cron_next_ms(
    expression: str,
    timezone: str,
    after_ms: int,
    dst: DstPolicy | msgspec.UnsetType = msgspec.UNSET,
    dialect: CronDialect | msgspec.UnsetType = msgspec.UNSET,
) -> int:
    """The first firing of a cron schedule strictly after ``after_ms``. Raises
    OverflowError when there is none before year 9999 (the schedule is exhausted), and
    ValueError only for an expression :func:`parse_cron` refuses.

    A matching wall time W fires at W minus an offset the zone has near that instant, so
    the walk starts at ``after`` plus the least offset around it (a gap's matches lie
    behind ``after``'s own wall time yet fire after it) and stops once W minus the
    greatest offset is past the best instant found (a shifted match fires later than
    wall times after it: Lord Howe's 02:20 at 02:50, its 02:40 at 02:40)."""
    fields = parse_cron(expression, dialect)
    gap, repeat = dst_rule(fields, dst)
    zone = zone_info(timezone)
    after = from_ms(after_ms)
    least, _ = offset_range(timezone, after - REACH, after + REACH)
    wall = (after + least).replace(tzinfo=None)
    best: datetime | None = None
    greatest = least
    while True:
        wall = next_match(fields, wall)  # OverflowError past the last year: exhausted
        if best is not None and wall - greatest > best.replace(tzinfo=None):
            return to_ms(best)
        for instant, _ in classify(wall, zone, gap, repeat)[0]:
            if instant > after and (best is None or instant < best):
                best = instant
                greatest = offset_range(timezone, after - REACH, best + REACH)[1]


def _bounded(fire_ms: int | None) -> int | None:
    return None if fire_ms is None or fire_ms > MAX_MS else fire_ms


def first_fire_ms(schedule: Schedule, now_ms: int) -> int | None:
    """When a newly registered (or rescheduled) job fires first; None if never (before
    :data:`MAX_MS`). Raises ValueError for a cron expression that cannot fire."""
    try:
        return _bounded(_first_fire_ms(schedule, now_ms))
    except OverflowError:  # past year 9999: exhausted
        return None


def first_planned_ms(timing: Timing, member_id: str, now_ms: int) -> int | None:
    """A job's first timer score from ``now_ms``: its first nominal tick whose planned time
    (the tick plus the job's spread offset, core/jitter.py) is after now, as planned; an
    interval with no ``start_at`` has its phase at now, whatever the offset.
    ``timing`` has its ``H`` resolved (models.timing_of)."""
    offset = offset_ms(member_id, timing.spread_s)
    schedule = timing.schedule
    starts = timing.starts_ms
    if isinstance(schedule, IntervalSchedule) and schedule.start_at is None:
        # its phase is its creation (or its window's start): spread jobs made together
        # run apart, not together
        every = max(round(schedule.every_s * 1000), 1)
        first: int | None = starts if starts is not None and starts > now_ms else now_ms + every
    else:
        after = now_ms - offset if starts is None else max(now_ms - offset, starts - 1)
        first = first_fire_ms(schedule, after)
    return None if first is None or beyond(timing, first) else first + offset


def beyond(timing: Timing, tick: int) -> bool:
    """Whether a tick is past the end of the timing's window (``ends_at``)."""
    return timing.ends_ms is not None and tick > timing.ends_ms


def timing_next_ms(timing: Timing, prev_ms: int) -> int | None:
    """The tick after ``prev_ms`` within the timing's window (None past ``ends_at``)."""
    tick = next_fire_ms(timing.schedule, prev_ms)
    return None if tick is None or beyond(timing, tick) else tick


class FirstFires:
    """First timer scores of many jobs registered at one instant (a bulk registration):
    one walk of a cron timing's ticks over its spread window, shared by every job of that
    timing, whatever each one's offset."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self._ticks: dict[bytes, list[int | None]] = {}
        self._same: dict[bytes, tuple[int | None]] = {}

    def of(self, raw: bytes, timing: Timing, member_id: str) -> int | None:
        same = self._same.get(raw)  # no spread: one answer for every job of the timing
        if same is not None:
            return same[0]
        if not timing.spread_s:
            first = first_planned_ms(timing, member_id, self.now_ms)
            self._same[raw] = (first,)
            return first
        windowed = timing.starts_ms is not None or timing.ends_ms is not None
        cron_like = CronSchedule | WindowSchedule | MultiSchedule
        if not isinstance(timing.schedule, cron_like) or windowed:
            return first_planned_ms(timing, member_id, self.now_ms)  # arithmetic, or rare
        ticks = self._ticks.get(raw)
        if ticks is None:  # every tick from now - spread on, and the first after now
            spread_ms = round(timing.spread_s * 1000)
            tick = first_fire_ms(timing.schedule, self.now_ms - spread_ms)
            ticks = self._ticks[raw] = [tick]
            while tick is not None and tick <= self.now_ms:
                tick = next_fire_ms(timing.schedule, tick)
                ticks.append(tick)
        offset = offset_ms(member_id, timing.spread_s)
        for tick in ticks:
            if tick is None or tick > self.now_ms - offset:
                return None if tick is None else tick + offset
        return None  # unreachable: the last tick is after now


def next_fire_ms(schedule: Schedule, prev_ms: int) -> int | None:
    """The firing after the one at ``prev_ms``; None when the schedule is exhausted."""
    try:
        return _bounded(_next_fire_ms(schedule, prev_ms))
    except OverflowError:
        return None


def _earliest(schedule: MultiSchedule, after_ms: int) -> int:
    """The first tick after ``after_ms`` of any of its specs; OverflowError when none has
    one before year 9999."""
    ticks = []
    for spec in schedule.schedules:
        try:
            ticks.append(
                cron_next_ms(spec.expression, spec.timezone, after_ms, spec.dst, spec.dialect)
            )
        except OverflowError:
            continue
    if not ticks:
        raise OverflowError("no spec of the schedule fires again")
    return min(ticks)


def _first_fire_ms(schedule: Schedule, now_ms: int) -> int | None:
    match schedule:
        case MultiSchedule():
            return _earliest(schedule, now_ms)
        case CronSchedule(expression=expr, timezone=tz, dst=dst, dialect=dialect):
            return cron_next_ms(expr, tz, now_ms, dst, dialect)
        case WindowSchedule(cron=expr, timezone=tz):  # a window opens at each cron tick
            return cron_next_ms(expr, tz, now_ms)
        case IntervalSchedule(every_s=every, start_at=start):
            every_ms = max(round(every * 1000), 1)
            if start is None:
                return now_ms + every_ms
            # A past start_at sets the phase, not a backlog: the first tick from now on.
            start_ms = to_ms(start)
            if start_ms >= now_ms:
                return start_ms
            return start_ms + -(-(now_ms - start_ms) // every_ms) * every_ms
        case OnceSchedule(at=at):
            # A past instant fires at once: its tick is now, so it is not a missed schedule.
            return max(to_ms(at), now_ms)
        case TriggeredSchedule():
            return None
    raise TypeError(f"not a schedule: {schedule!r}")


def _next_fire_ms(schedule: Schedule, prev_ms: int) -> int | None:
    match schedule:
        case MultiSchedule():
            return _earliest(schedule, prev_ms)
        case CronSchedule(expression=expr, timezone=tz, dst=dst, dialect=dialect):
            return cron_next_ms(expr, tz, prev_ms, dst, dialect)
        case WindowSchedule(cron=expr, timezone=tz):
            return cron_next_ms(expr, tz, prev_ms)
        case IntervalSchedule(every_s=every):
            return prev_ms + round(every * 1000)
        case OnceSchedule() | TriggeredSchedule():
            return None
    raise TypeError(f"not a schedule: {schedule!r}")


_timing_decoder = msgspec.json.Decoder(Timing)


class NextFireMemo:
    """Next fire times keyed by (stored timing JSON, previous fire).

    The shard actor receives each due job's :class:`Timing` as the JSON string Redis
    stores; jobs that share a schedule share the string, so a minute-boundary burst of
    identical cron jobs costs one croniter call and one decode, then dictionary hits.
    """

    def __init__(self, max_entries: int = 65536) -> None:
        self._max = max_entries
        self._next: dict[tuple[bytes, int], int | None] = {}
        self._timings: dict[bytes, Timing] = {}
        self._offsets: dict[tuple[bytes | str, float], int] = {}

    def timing(self, raw: bytes) -> Timing:
        timing = self._timings.get(raw)
        if timing is None:
            if len(self._timings) >= self._max:
                self._timings.clear()
            timing = self._timings[raw] = _timing_decoder.decode(raw)
        return timing

    def offset(self, member: bytes | str, spread_s: float) -> int:
        """A job's spread offset (core/jitter.py), remembered: a spread job is planned
        at each of its ticks."""
        key = (member, spread_s)
        off = self._offsets.get(key)
        if off is None:
            if len(self._offsets) >= self._max:
                self._offsets.clear()
            name = member.decode() if isinstance(member, bytes) else member
            off = self._offsets[key] = offset_ms(name, spread_s)
        return off

    def next_after(self, raw: bytes, prev_ms: int) -> int | None:
        key = (raw, prev_ms)
        try:
            return self._next[key]
        except KeyError:
            pass
        if len(self._next) >= self._max:
            self._next.clear()
        value = self._next[key] = timing_next_ms(self.timing(raw), prev_ms)
        return value
