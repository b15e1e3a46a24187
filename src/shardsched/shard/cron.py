"""Next-fire arithmetic: pure functions over schedules, no I/O.

Cron expressions are matched by croniter on the *wall clock* of the job's time zone; the
mapping from wall-clock candidates to instants is ours, because that is where DST bites.
The rule is Vixie cron's, which operators already know:

* **Spring forward (a wall time that does not exist).** A job whose hour field is a
  wildcard (``*`` or ``*/n``) simply has no firing in the missing hour: "0 * * * *" in
  America/New_York fires at 01:00 EST and next at 03:00 EDT, one real hour apart. A job
  with a fixed hour fires once, shifted forward by the size of the gap: "30 2 * * *" in
  Europe/Berlin fires at 03:30 CEST on the day of the change, and is never lost.
* **Fall back (a wall time that happens twice).** A wildcard-hour job fires in both
  occurrences (it is "every hour", and the clock has two of them); a fixed-hour job fires
  only at the first occurrence: "30 2 * * *" in Berlin fires at 02:30 CEST, not again at
  02:30 CET.

Everything is in integer milliseconds since the epoch (the Redis server's clock), and a
memo keyed by (schedule, previous fire) makes 25,000 jobs on the same expression cost one
computation (DESIGN §1).
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import msgspec
from croniter import croniter

from shardsched.models import CronSchedule, IntervalSchedule, OnceSchedule, Schedule, Timing

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: How many wall-clock candidates we look at before declaring an expression unsatisfiable
#: (e.g. "0 0 30 2 *", February 30th).
_MAX_CANDIDATES = 64
#: Longer than any DST shift: how far ahead we look for a fall-back.
_LOOKAHEAD = timedelta(hours=3)


@lru_cache(maxsize=4096)
def parse_cron(expression: str) -> tuple[str, ...]:
    """Return the five fields of a cron expression; raises ValueError if it is not one.

    Memoised: validating 25,000 registrations of one expression costs one croniter parse.
    """
    fields = tuple(expression.split())
    if len(fields) != 5:
        raise ValueError(f"Cron expression must have 5 fields, got {len(fields)}")
    if not croniter.is_valid(" ".join(fields)):
        raise ValueError(f"Invalid cron expression {expression!r}")
    return fields


def to_ms(dt: datetime) -> int:
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


@lru_cache(maxsize=256)
def _zone(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


def classify(
    wall: datetime, zone: zoneinfo.ZoneInfo, hour_wildcard: bool
) -> tuple[list[tuple[datetime, str | None]], str | None]:
    """What the DST rule makes of a matching wall-clock time: the UTC instants it fires at,
    each with a note ("dst_shifted": moved past a spring-forward gap; "dst_repeated": the
    second occurrence of a repeated hour), and why an occurrence does not fire, if one
    does not ("dst_gap": the wall time does not exist; "dst_repeat_skipped": the repeated
    occurrence of a fixed-hour time)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first == second:
        return [(first, None)], None
    exists = first.astimezone(zone).replace(tzinfo=None) == wall
    if not exists:  # in a spring-forward gap; fold=0 maps it past the gap
        return ([], "dst_gap") if hour_wildcard else ([(first, "dst_shifted")], None)
    if hour_wildcard:
        return [(first, None), (second, "dst_repeated")], None
    return [(first, None)], "dst_repeat_skipped"


def _instants(wall: datetime, zone: zoneinfo.ZoneInfo, hour_wildcard: bool) -> list[datetime]:
    """The UTC instants at which a matching wall-clock time fires (0, 1 or 2 of them)."""
    return [instant for instant, _ in classify(wall, zone, hour_wildcard)[0]]


def cron_next_ms(expression: str, timezone: str, after_ms: int) -> int:
    """The first firing of a cron schedule strictly after ``after_ms``.

    Raises ValueError when the expression never matches.
    """
    fields = parse_cron(expression)
    expr = " ".join(fields)
    hour_wildcard = fields[1].startswith("*")
    zone = _zone(timezone)
    after = from_ms(after_ms)
    local = after.astimezone(zone)
    wall = local.replace(tzinfo=None, fold=0)
    # Wall times at or behind `after`'s can still fire later in real time when the clock
    # repeats them: `after`'s own wall time always (its second occurrence), and just before
    # a fall-back the whole repeated stretch. Only wildcard-hour jobs fire in both.
    behind = timedelta(0)
    if hour_wildcard:
        offset_now = local.utcoffset()
        offset_soon = (after + _LOOKAHEAD).astimezone(zone).utcoffset()
        if offset_now is not None and offset_soon is not None and offset_soon < offset_now:
            behind = offset_now - offset_soon
    it = croniter(expr, wall - behind - timedelta(minutes=1))
    best: datetime | None = None
    for _ in range(_MAX_CANDIDATES + behind // timedelta(minutes=1)):
        candidate: datetime = it.get_next(datetime)
        for instant in _instants(candidate, zone, hour_wildcard):
            if instant > after and (best is None or instant < best):
                best = instant
        if best is not None and candidate > wall:
            # Past `after`'s wall time, instants only grow with the wall clock.
            break
    if best is None:
        raise ValueError(f"Cron expression {expression!r} has no firing after {after.isoformat()}")
    return to_ms(best)


def first_fire_ms(schedule: Schedule, now_ms: int) -> int | None:
    """When a newly registered (or rescheduled) job fires first."""
    match schedule:
        case CronSchedule(expression=expr, timezone=tz):
            return cron_next_ms(expr, tz, now_ms)
        case IntervalSchedule(every_s=every, start_at=start):
            if start is not None:
                return to_ms(start)
            return now_ms + round(every * 1000)
        case OnceSchedule(at=at):
            return to_ms(at)
    raise TypeError(f"not a schedule: {schedule!r}")


def next_fire_ms(schedule: Schedule, prev_ms: int) -> int | None:
    """The firing after the one at ``prev_ms``; None when the schedule is exhausted."""
    match schedule:
        case CronSchedule(expression=expr, timezone=tz):
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

    def timing(self, raw: bytes) -> Timing:
        timing = self._timings.get(raw)
        if timing is None:
            if len(self._timings) >= self._max:
                self._timings.clear()
            timing = self._timings[raw] = _timing_decoder.decode(raw)
        return timing

    def next_after(self, raw: bytes, prev_ms: int) -> int | None:
        key = (raw, prev_ms)
        try:
            return self._next[key]
        except KeyError:
            pass
        if len(self._next) >= self._max:
            self._next.clear()
        value = self._next[key] = next_fire_ms(self.timing(raw).schedule, prev_ms)
        return value
