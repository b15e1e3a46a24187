"""How long runs take, and what a job's ``overlap`` rule then does with its ticks: the
test kit's model of lua/fire.lua's overlap branch and lua/lib/buffer.lua, written from
their documented rules (core/models.Overlap), for ``simulate(..., durations=...)``.

A job's *active* run is its last fired tick's run, under way from when it started until
it ends (its duration later) or is stopped. A tick meeting it: ``allow`` runs beside it;
``forbid`` is skipped (``overlap``); ``replace`` stops it and runs; ``buffer_one`` /
``buffer_all`` wait for it to end, oldest first, one (or 1,000) at most, the next skipped
(``overlap_buffer_full``); ``cancel_other`` stops it and runs once it stopped (here at
once: a worker's stop time is not modelled), a tick meeting one still waiting skipped
(``overlap_buffer_full``). Runs start when they fire (no claim delay) and never fail.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import cast

from shardsched.core.models import Overlap
from shardsched.testing.tick import Tick

#: How long a job's runs take: a timedelta, or a function of the tick.
Duration = timedelta | Callable[[Tick], timedelta]
Durations = Mapping[str, Duration]
_CAP = {Overlap.BUFFER_ONE: 1, Overlap.BUFFER_ALL: 1000}


def _ms(duration: Duration | None, tick: Tick) -> int:
    if duration is None:
        return 0
    taken = duration(tick) if callable(duration) else duration
    if not isinstance(taken, timedelta):
        raise TypeError(f"a run's duration is a timedelta, not {type(taken).__name__}")
    if taken < timedelta(0):
        raise ValueError(f"a run's duration cannot be negative ({taken})")
    return round(taken.total_seconds() * 1000)


def check_durations(durations: Durations, jobs: list[tuple[str, str]]) -> None:
    """``durations`` name only jobs that are there (by name or id), each a timedelta or a
    function: a typo would model every run as taking no time, and test nothing."""
    known = {n for pair in jobs for n in pair}
    unknown = sorted(str(k) for k in durations if k not in known)
    if unknown:
        raise ValueError(f"durations for no job of the simulation: {', '.join(unknown)}")
    for key, value in durations.items():
        if not (isinstance(value, timedelta) or callable(value)):
            raise TypeError(f"durations[{key!r}]: a timedelta or a function of the Tick")
        if isinstance(value, timedelta) and value < timedelta(0):
            raise ValueError(f"durations[{key!r}]: a run cannot take {value}")


def with_overlap(
    ticks: list[Tick], policies: Mapping[str, tuple[Overlap, Duration | None]], end_ms: int
) -> list[Tick]:
    """``ticks`` (in order of decision) with each job's overlap rule applied, given its
    runs' durations (``policies``: job name → (overlap, duration)); ticks still waiting
    at ``end_ms`` are ``buffered`` with no start."""
    out = list(ticks)
    fired: dict[str, list[int]] = {name: [] for name in policies}
    for i, t in enumerate(out):  # one pass for every job
        if t.outcome == "fired" and t.job in fired:
            fired[t.job].append(i)
    collecting = gc.isenabled()
    gc.disable()  # as the clock does: the collector would walk a year's new ticks again
    try:
        for name, (overlap, duration) in policies.items():
            _one_job(out, fired[name], Overlap(overlap), duration, end_ms)
    finally:
        if collecting:
            gc.enable()
    out.sort(key=_when)
    return out


def _when(tick: Tick) -> tuple[int, int]:
    start = tick.fired_ms if tick.fired_ms is not None else tick.at_ms
    return (start, tick.at_ms)


def _one_job(
    out: list[Tick], fired: list[int], overlap: Overlap, duration: Duration | None, end: int
) -> None:
    active: int | None = None  # index in out of the job's active run
    active_end = 0  # when it ends (or was stopped)
    waiting: deque[int] = deque()
    fixed = None if callable(duration) else _ms(duration, out[fired[0]]) if fired else 0
    new = tuple.__new__  # a Tick made whole at once: _replace costs a year's run a second

    def start(i: int, at: int, buffered: bool = False) -> None:
        nonlocal active, active_end
        t = out[i]
        active_end = at + (fixed if fixed is not None else _ms(duration, t))
        out[i] = new(Tick, (t[0], t[1], "fired", t[3], at, t[5], t[6], t[7], active_end,
                            buffered, t[10]))  # fmt: skip
        active = i

    def release(upto: int) -> None:
        nonlocal active
        while active is not None and active_end <= upto:
            if waiting:
                start(waiting.popleft(), active_end, buffered=True)
            else:
                active = None

    def stop(i: int, at: int) -> None:
        out[i] = out[i]._replace(ended_ms=at, cancelled=True)

    allow = overlap == Overlap.ALLOW
    for i in fired:
        now = cast(int, out[i][4])  # fired_ms: a fired tick has one
        if active is not None and active_end <= now:
            release(now)
        if allow or active is None:
            start(i, now)
        elif overlap == Overlap.FORBID:
            out[i] = out[i]._replace(outcome="skipped", reason="overlap", fired_ms=None)
        elif overlap == Overlap.REPLACE:
            stop(active, now)
            start(i, now)
        elif overlap in _CAP:
            if len(waiting) < _CAP[overlap]:
                out[i] = out[i]._replace(outcome="buffered", fired_ms=None, buffered=True)
                waiting.append(i)
            else:
                out[i] = out[i]._replace(
                    outcome="skipped", reason="overlap_buffer_full", fired_ms=None
                )
        else:  # cancel_other: the other is stopped; this one runs once it has
            stop(active, now)
            start(i, now, buffered=True)
    release(end)
