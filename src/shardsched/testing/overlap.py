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

from collections import deque
from collections.abc import Callable, Mapping
from datetime import timedelta

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
    return max(0, round(taken.total_seconds() * 1000))


def with_overlap(
    ticks: list[Tick], policies: Mapping[str, tuple[Overlap, Duration | None]], end_ms: int
) -> list[Tick]:
    """``ticks`` (in order of decision) with each job's overlap rule applied, given its
    runs' durations (``policies``: job name → (overlap, duration)); ticks still waiting
    at ``end_ms`` are ``buffered`` with no start."""
    out = list(ticks)
    for name, (overlap, duration) in policies.items():
        mine = [i for i, t in enumerate(out) if t.job == name and t.outcome == "fired"]
        _one_job(out, mine, Overlap(overlap), duration, end_ms)
    out.sort(key=_when)
    return out


def _when(tick: Tick) -> tuple[int, int]:
    start = tick.fired_ms if tick.fired_ms is not None else tick.at_ms
    return (start, tick.at_ms)


def _one_job(
    out: list[Tick], fired: list[int], overlap: Overlap, duration: Duration | None, end: int
) -> None:
    active: int | None = None  # index in out of the job's active run
    waiting: deque[int] = deque()

    def ends(i: int) -> int:
        ended = out[i].ended_ms
        assert ended is not None
        return ended

    def start(i: int, at: int, buffered: bool = False) -> None:
        nonlocal active
        out[i] = out[i]._replace(
            outcome="fired", fired_ms=at, ended_ms=at + _ms(duration, out[i]), buffered=buffered
        )
        active = i

    def release(upto: int) -> None:
        nonlocal active
        while active is not None and ends(active) <= upto:
            if waiting:
                start(waiting.popleft(), ends(active), buffered=True)
            else:
                active = None

    def stop(i: int, at: int) -> None:
        out[i] = out[i]._replace(ended_ms=at, cancelled=True)

    for i in fired:
        now = out[i].fired_ms
        assert now is not None
        release(now)
        busy = active is not None and ends(active) > now
        if overlap == Overlap.ALLOW or not busy:
            start(i, now)
        elif overlap == Overlap.FORBID:
            out[i] = out[i]._replace(outcome="skipped", reason="overlap", fired_ms=None)
        elif overlap == Overlap.REPLACE:
            assert active is not None
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
            assert active is not None
            stop(active, now)
            start(i, now, buffered=True)
    release(end)
