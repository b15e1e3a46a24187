"""Next-fire arithmetic: pure functions over schedules, no I/O.

Cron expressions are matched by croniter on the *wall clock* of the job's time zone; the
mapping from wall-clock candidates to instants is ours, because that is where DST bites.
The rule is Vixie cron's, which operators already know:

* **Spring forward (a wall time that does not exist).** A job whose hour field is a
  wildcard (``*`` or ``*/n``) simply has no firing in the missing hour: "0 * * * *" in
  America/New_York fires at 01:00 EST and next at 03:00 EDT, one real hour apart. A job
  with a fixed hour fires once, shifted forward by the size of the gap: "30 2 * * *" in
  Europe/Berlin fires at 03:30 CEST on the day of the change, and is never lost. Every
  match inside the gap fires so, in order: "0,30 2 * * *" in New York at 03:00 and 03:30
  EDT (``tests/core/test_cron_gaps.py`` checks it against a minute-by-minute model).
* **Fall back (a wall time that happens twice).** A wildcard-hour job fires in both
  occurrences (it is "every hour", and the clock has two of them); a fixed-hour job fires
  only at the first occurrence: "30 2 * * *" in Berlin fires at 02:30 CEST, not again at
  02:30 CET.

That is the default. A schedule's ``dst`` policy (:class:`~shardsched.core.models.DstPolicy`)
sets either half explicitly for every hour field: ``gap: shift | skip`` and
``repeat: first | second | both``. Every wall time that does not fire is a recorded
decision, never a silence: :func:`classify` names it (``dst_gap``, ``dst_repeat_skipped``:
the second occurrence, ``dst_first_skipped``: the first), the preview lists it and the
ledger shows it as a skipped tick (:func:`suppressed_between`).

Everything is in integer milliseconds since the epoch (the Redis server's clock), and a
memo keyed by (schedule, previous fire) makes 25,000 jobs on the same expression cost one
computation.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

import msgspec
from croniter import CroniterBadDateError, croniter

from shardsched.core.dst import classify, dst_rule, zone_info
from shardsched.core.dst_policy import DstPolicy, DstRepeat
from shardsched.core.instants import MAX_MS, from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import (
    CronSchedule,
    IntervalSchedule,
    MultiSchedule,
    OnceSchedule,
    Schedule,
    Timing,
    WindowSchedule,
)

#: Longer than any DST shift: how far ahead we look for a fall-back.
_LOOKAHEAD = timedelta(hours=3)
#: Longer than any gap a real zone's clock jumps over (the longest are 24 h, when a zone
#: skipped a whole day to change its side of the date line): matching wall times that far
#: past the first one and not one of them exists cannot happen in a real zone.
_LONGEST_GAP = timedelta(hours=49)


#: Vixie cron's macros, as the five fields they stand for (@reboot has no schedule).
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@lru_cache(maxsize=4096)
def parse_cron(expression: str) -> tuple[str, ...]:
    """Return the five fields of a cron expression (or of a macro, ``@daily``); raises
    ValueError if it is not one, or if it never fires (``0 0 30 2 *``: February 30th).

    Memoised: validating 25,000 registrations of one expression costs one croniter parse.
    """
    macro = CRON_MACROS.get(expression.strip().lower())
    fields = tuple((macro or expression).split())
    if len(fields) != 5:
        raise ValueError(
            f"Cron expression must have 5 fields (or be one of {', '.join(CRON_MACROS)}),"
            f" got {len(fields)}"
        )
    expr = " ".join(fields)
    if not croniter.is_valid(expr):
        raise ValueError(f"Invalid cron expression {expression!r}")
    try:  # croniter looks decades ahead: a leap-day schedule is found, Feb 30th is not
        croniter(expr, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(f"Cron expression {expression!r} never fires") from None
    return fields


def cron_next_ms(
    expression: str,
    timezone: str,
    after_ms: int,
    dst: DstPolicy | msgspec.UnsetType = msgspec.UNSET,
) -> int:
    """The first firing of a cron schedule strictly after ``after_ms``.

    Raises ValueError when the expression never matches.
    """
    fields = parse_cron(expression)
    expr = " ".join(fields)
    gap, repeat = dst_rule(fields, dst)
    zone = zone_info(timezone)
    after = from_ms(after_ms)
    local = after.astimezone(zone)
    wall = local.replace(tzinfo=None, fold=0)
    # Wall times at or behind `after`'s can still fire later in real time when the clock
    # repeats them: `after`'s own wall time always (its second occurrence), and just before
    # a fall-back the whole repeated stretch: a rule that fires a second occurrence.
    behind = timedelta(0)
    offset_now = local.utcoffset()
    if repeat != DstRepeat.FIRST:
        offset_soon = (after + _LOOKAHEAD).astimezone(zone).utcoffset()
        if offset_now is not None and offset_soon is not None and offset_soon < offset_now:
            behind = offset_now - offset_soon
    # Just after a spring-forward, the gap's wall times lie behind `after`'s, yet a rule
    # that shifts them fires them after it (02:30 of a skipped hour at 03:30): look there
    # too, or every match of the gap but the first is lost.
    offset_before = (after - _LOOKAHEAD).astimezone(zone).utcoffset()
    if offset_now is not None and offset_before is not None and offset_before < offset_now:
        behind = max(behind, offset_now - offset_before)
    it = croniter(expr, wall - behind - timedelta(minutes=1))
    best: datetime | None = None
    first: datetime | None = None
    #: a shifted match fires later than wall times after it (Lord Howe's 30-minute gap:
    #: 02:20 fires at 02:50, 02:40 at 02:40): look on to where the shift landed
    horizon: datetime | None = None
    while True:
        try:
            candidate: datetime = it.get_next(datetime)
        except CroniterBadDateError:
            raise ValueError(f"Cron expression {expression!r} never fires") from None
        except ValueError as exc:
            if "out of range" in str(exc):  # walked past year 9999: exhausted
                raise OverflowError(str(exc)) from None
            raise
        first = first or candidate
        for instant, note in classify(candidate, zone, gap, repeat)[0]:
            if instant > after and (best is None or instant < best):
                best = instant
            if note == "dst_shifted":
                landed = instant.astimezone(zone).replace(tzinfo=None)
                horizon = landed if horizon is None else max(horizon, landed)
        if best is not None and candidate > wall and (horizon is None or candidate >= horizon):
            # Past `after`'s wall time and any shift's landing, instants only grow.
            break
        if best is None and candidate - first > _LONGEST_GAP:  # not a real zone's clock
            raise ValueError(
                f"Cron expression {expression!r} has no firing after {after.isoformat()}"
            )
    return to_ms(best)


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
            ticks.append(cron_next_ms(spec.expression, spec.timezone, after_ms, spec.dst))
        except OverflowError:
            continue
    if not ticks:
        raise OverflowError("no spec of the schedule fires again")
    return min(ticks)


def _first_fire_ms(schedule: Schedule, now_ms: int) -> int | None:
    match schedule:
        case MultiSchedule():
            return _earliest(schedule, now_ms)
        case CronSchedule(expression=expr, timezone=tz, dst=dst):
            return cron_next_ms(expr, tz, now_ms, dst)
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
    raise TypeError(f"not a schedule: {schedule!r}")


def _next_fire_ms(schedule: Schedule, prev_ms: int) -> int | None:
    match schedule:
        case MultiSchedule():
            return _earliest(schedule, prev_ms)
        case CronSchedule(expression=expr, timezone=tz, dst=dst):
            return cron_next_ms(expr, tz, prev_ms, dst)
        case WindowSchedule(cron=expr, timezone=tz):
            return cron_next_ms(expr, tz, prev_ms)
        case IntervalSchedule(every_s=every):
            return prev_ms + round(every * 1000)
        case OnceSchedule():
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
