"""A virtual clock over the real scheduling core: what a set of jobs fires, skips and
shifts over any span, through any outage, with no Redis and no waiting.

Each job's ticks are decided as a node decides them (``core.catchup.decide`` and
``on_calendar`` on the job's ``Timing``, its first tick from ``first_planned_ms``, DST
decisions from ``core.dst``); ticks the scheduler meets on time, which is all of them
outside an outage, are walked by ``core.tick_runs`` (exact, fast) and fire on their
planned time unless a calendar skips them. An outage is the scheduler being down: ticks
that fall due in it are decided when it ends, by the job's catch-up policy (fired late,
skipped and why, or handed to a paced backfill that starts them at the job's
``catchup_per_minute``). ``max_fires`` and ``ends_at`` end a job's ticks.

How long runs take is the caller's to say (``simulate(..., durations=...)``): then a
job's ``overlap`` rule decides what a tick meeting a run still under way does
(testing/overlap.py). Not modelled: the worker side (retries, timeouts, claim delays).
"""

from __future__ import annotations

import bisect
import gc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shardsched.core.calendars import CALENDAR_SKIP, Calendar, tick_allowed
from shardsched.core.catchup import decide, on_calendar
from shardsched.core.dst import dst_decisions
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import JobSpec, Timing, cron_specs, schedule_zone
from shardsched.core.schedule import first_planned_ms, parse_cron, timing_next_ms
from shardsched.core.tick_runs import ticks_from
from shardsched.core.timing import timing_of
from shardsched.testing.jobs import JobsLike, named_specs
from shardsched.testing.overlap import Durations, check_durations, with_overlap
from shardsched.testing.tick import Tick


@dataclass
class _Job:
    name: str
    job_id: str
    timing: Timing
    off: int  #: the spread offset: timer scores are planned times
    timer: int | None  #: the next planned time, as the timer holds it
    zone: str
    fires: int = 0

    def next_after(self, tick: int) -> int | None:
        return timing_next_ms(self.timing, tick)


@dataclass
class VirtualClock:
    """The scheduler at ``start`` with ``jobs`` registered then, time moving only when
    told: :meth:`skip_time`, :meth:`sleep_until`, :meth:`outage`. Every tick decided so far
    is in :attr:`ticks`, in order of decision."""

    jobs: JobsLike
    start: datetime
    calendars: Mapping[str, Calendar] = field(default_factory=dict)
    ticks: list[Tick] = field(default_factory=list, init=False)
    _now: int = field(init=False)
    _down: list[tuple[int, int]] = field(default_factory=list, init=False)
    _state: list[_Job] = field(init=False)

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise ValueError("start is an aware datetime (datetime(..., tzinfo=UTC))")
        self._now = to_ms(self.start)
        self._state = []
        for job_id, spec in named_specs(self.jobs):
            timing = timing_of(spec, job_id)
            off = offset_ms(job_id, timing.spread_s)
            first = first_planned_ms(timing, job_id, self._now)
            zone = schedule_zone(timing.schedule)
            self._state.append(_Job(spec.name, job_id, timing, off, first, zone))

    @property
    def now(self) -> datetime:
        return from_ms(self._now)

    def skip_time(self, delta: timedelta) -> list[Tick]:
        """Move time forward by ``delta``; the ticks decided on the way."""
        return self.sleep_until(self.now + delta)

    def sleep_until(self, when: datetime) -> list[Tick]:
        """Move time forward to ``when``; the ticks decided on the way (those due at
        ``when`` included)."""
        if when.tzinfo is None:
            raise ValueError("when is an aware datetime (datetime(..., tzinfo=UTC))")
        until = to_ms(when)
        if until < self._now:
            raise ValueError(f"{when.isoformat()} is before the clock's now")
        decided: list[Tick] = []
        collecting = gc.isenabled()
        gc.disable()  # half a million small tuples: the collector would walk them again and again
        try:
            for job in self._state:
                decided += self._advance(job, self._now, until)
        finally:
            if collecting:
                gc.enable()
        if len(self._state) > 1:
            decided.sort(key=_when)
        self._now = until
        self.ticks += decided
        return decided

    def outage(self, duration: timedelta) -> list[Tick]:
        """The scheduler is down from now for ``duration``: nothing fires; what fell due
        is decided when it is back, at the end. The ticks decided (at its end)."""
        self._down.append((self._now, self._now + round(duration.total_seconds() * 1000)))
        return self.skip_time(duration)

    def _back_at(self, t: int) -> int:
        """When the scheduler, due to act at ``t``, acts: then, or when an outage over it
        ends."""
        for lo, hi in self._down:
            if lo <= t < hi:
                return hi
        return t

    def _advance(self, job: _Job, since: int, until: int) -> list[Tick]:
        out: list[Tick] = []
        limit = job.timing.max_fires
        while job.timer is not None and job.timer <= until:
            acts = self._back_at(job.timer)
            if acts > until:
                break
            if acts == job.timer:  # on time: every tick up to the next outage, at once
                stop = min([until, *[lo - 1 for lo, _ in self._down if lo > job.timer]])
                out += self._on_time(job, stop)
                continue
            out += self._decide(job, acts)
            if limit is not None and job.fires >= limit:
                job.timer = None
        for skip in self._dst_skips(job, since, until):  # a few: in their places
            bisect.insort(out, skip, key=_when)
        return out

    def _on_time(self, job: _Job, stop: int) -> list[Tick]:
        """The job's ticks from its timer up to ``stop``, each met on its planned time."""
        assert job.timer is not None
        schedule, timing, off = job.timing.schedule, job.timing, job.off
        ends = timing.ends_ms
        hi = stop - off if ends is None else min(stop - off, ends)
        ticks = ticks_from(schedule, job.timer - off, hi)
        if not ticks:  # past its ends_at
            job.timer = None
            return []
        notes = self._dst_notes(job, ticks)
        if timing.max_fires is None and timing.calendars is None:  # the common case, fast
            job.fires += len(ticks)
            get, new, name, zone = notes.get, tuple.__new__, job.name, job.zone
            out = [
                new(
                    Tick, (name, t, "fired", None, t + off, get(t), False, zone, None, False, False)
                )
                for t in ticks
            ]
            following = job.next_after(ticks[-1])
            job.timer = None if following is None else following + off
            return out
        out = []
        for tick in ticks:
            if timing.max_fires is not None and job.fires >= timing.max_fires:
                job.timer = None
                return out
            if timing.calendars is not None and not tick_allowed(
                timing.calendars, self.calendars, tick, job.zone
            ):
                out.append(Tick(job.name, tick, "skipped", CALENDAR_SKIP, zone=job.zone))
                continue
            job.fires += 1
            dst = notes.get(tick)
            out.append(Tick(job.name, tick, "fired", None, tick + off, dst, zone=job.zone))
        following = job.next_after(ticks[-1])
        job.timer = None if following is None else following + off
        return out

    def _decide(self, job: _Job, now: int) -> list[Tick]:
        """One pass of the node over the job's due timer entry at ``now`` (after an
        outage): core.catchup's decision, with the job's calendars."""
        assert job.timer is not None
        timing, off, old = job.timing, job.off, job.timer - job.off
        decision = decide(timing, old, now - off, job.next_after)
        if timing.calendars is not None:
            decision = on_calendar(decision, timing, self.calendars)
        out = []
        if decision.skip is not None:
            skipped = ticks_from(timing.schedule, decision.skip.first, decision.skip.last)
            reason = decision.skip.reason
            out += [Tick(job.name, t, "skipped", reason, zone=job.zone) for t in skipped]
        grace = round(timing.misfire_grace_s * 1000)
        if decision.fire is not None:
            job.fires += 1
            late = now - (decision.fire + off) > grace
            out.append(Tick(job.name, decision.fire, "fired", None, now, None, late, job.zone))
        if decision.owed is not None:  # catchup paced: a backfill at per_minute a minute
            first, last = decision.owed
            step = 60_000 // max(timing.per_minute, 1)
            for k, t in enumerate(ticks_from(timing.schedule, first, last)):
                job.fires += 1
                out.append(Tick(job.name, t, "fired", None, now + k * step, None, True, job.zone))
        job.timer = None if decision.new is None else decision.new + off
        return out

    def _dst_notes(self, job: _Job, ticks: list[int]) -> dict[int, str]:
        if not ticks:
            return {}
        notes: dict[int, str] = {}
        for spec in cron_specs(job.timing.schedule):
            fields = parse_cron(spec.expression, spec.dialect)
            more, _ = dst_decisions(
                fields, spec.timezone, spec.dst, from_ms(ticks[0] - 1), from_ms(ticks[-1])
            )
            notes.update({to_ms(at): note for at, note in more.items()})
        return notes

    def _dst_skips(self, job: _Job, since: int, until: int) -> list[Tick]:
        """The wall times a DST change kept the job from firing at, in (since, until]."""
        out: list[Tick] = []
        for spec in cron_specs(job.timing.schedule):
            fields = parse_cron(spec.expression, spec.dialect)
            _, skipped = dst_decisions(
                fields, spec.timezone, spec.dst, from_ms(since), from_ms(until)
            )
            out += [
                Tick(job.name, to_ms(s.instant), "skipped", s.reason, zone=job.zone)
                for s in skipped
            ]
        return out


def _when(tick: Tick) -> tuple[int, int]:
    """A tick's place in time: when it started (or was decided skipped at its tick)."""
    return (tick.fired_ms if tick.fired_ms is not None else tick.at_ms, tick.at_ms)


class Simulation(list[Tick]):
    """Every tick of a span, in order, with the questions a test asks of them."""

    def of(self, job: str) -> list[Tick]:
        return [t for t in self if t.job == job]

    def fired(self, job: str | None = None) -> list[Tick]:
        return [t for t in self if t.outcome == "fired" and (job is None or t.job == job)]

    def skipped(self, job: str | None = None, reason: str | None = None) -> list[Tick]:
        return [
            t
            for t in self
            if t.outcome == "skipped"
            and (job is None or t.job == job)
            and (reason is None or t.reason == reason)
        ]


def simulate(
    jobs: JobsLike,
    start: datetime,
    duration: timedelta,
    outages: Iterable[tuple[datetime, timedelta]] = (),
    calendars: Mapping[str, Calendar] | None = None,
    durations: Durations | None = None,
) -> Simulation:
    """Every tick of ``jobs`` from ``start`` for ``duration``, the scheduler down for each
    (from, for how long) of ``outages``: what fired when, what was skipped and why.
    ``durations``: how long each job's runs take (by job name or id: a timedelta, or a
    function of the Tick); then each job's ``overlap`` rule is applied (testing/overlap)."""
    outages = list(outages)
    if any(down_from.tzinfo is None for down_from, _ in outages):
        raise ValueError("an outage starts at an aware datetime (datetime(..., tzinfo=UTC))")
    clock = VirtualClock(jobs, start, dict(calendars or {}))
    end = start + duration
    for down_from, down_for in sorted(outages, key=lambda o: o[0]):
        if down_from >= end:
            break
        clock.sleep_until(max(down_from, clock.now))
        clock.outage(min(down_for, end - clock.now))
    clock.sleep_until(end)
    if not durations:
        return Simulation(clock.ticks)
    named = named_specs(jobs)
    check_durations(durations, [(job_id, spec.name) for job_id, spec in named])
    policies = {}
    for job_id, spec in named:
        policies[spec.name] = (spec.overlap, durations.get(spec.name, durations.get(job_id)))
    return Simulation(with_overlap(clock.ticks, policies, to_ms(end)))


__all__ = ["JobSpec", "Simulation", "Tick", "VirtualClock", "simulate"]
