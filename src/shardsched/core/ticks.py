"""The ticks of a schedule: its nominal firing instants in a window, written once.

Backfill (which ticks of a window to run), the audit (which ticks should have fired) and
the preview (the next fire times) walk a schedule the same way: a first tick, then
:func:`~shardsched.core.schedule.next_fire_ms` until past the window.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardsched.core.instants import to_ms
from shardsched.core.models import IntervalSchedule, OnceSchedule, Schedule
from shardsched.core.schedule import next_fire_ms


def first_at_or_after(schedule: Schedule, anchor_ms: int, lo: int) -> int | None:
    """The schedule's first nominal tick at or after ``lo``.

    An interval keeps the phase of its ``start_at``, else of ``anchor_ms`` (the job's
    first fire), backwards as well as forwards; a ``once`` schedule's one tick is
    ``anchor_ms`` (the instant it fired at: a past ``at`` fires at registration)."""
    if isinstance(schedule, OnceSchedule):
        return anchor_ms if anchor_ms >= lo else None
    if isinstance(schedule, IntervalSchedule):
        every = round(schedule.every_s * 1000)
        anchor = to_ms(schedule.start_at) if schedule.start_at else anchor_ms
        return anchor + -((anchor - lo) // every) * every
    return next_fire_ms(schedule, lo - 1)


def walk(schedule: Schedule, first: int | None, hi: int | None = None) -> Iterator[int]:
    """``first``, then each next fire, up to ``hi`` (inclusive; None: until exhausted)."""
    tick = first
    while tick is not None and (hi is None or tick <= hi):
        yield tick
        tick = next_fire_ms(schedule, tick)


def ticks_in(schedule: Schedule, anchor_ms: int, lo: int, hi: int) -> Iterator[int]:
    """The schedule's nominal ticks in [lo, hi] (see :func:`first_at_or_after`)."""
    return walk(schedule, first_at_or_after(schedule, anchor_ms, lo), hi)
