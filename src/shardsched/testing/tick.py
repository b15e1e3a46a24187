"""One tick of a simulation (shardsched.testing) and what was decided for it."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime
from typing import Any, NamedTuple

from shardsched.core.instants import from_ms


class Tick(NamedTuple):
    """One tick of one job and what was decided for it."""

    job: str  #: the job's name
    at_ms: int  #: the nominal tick (ms since 1970, UTC)
    outcome: str  #: "fired" | "skipped" | "buffered" (waiting for a run under way)
    reason: str | None = None  #: why skipped (misfire, calendar, dst_gap, catchup_limit...)
    fired_ms: int | None = None  #: when it started: its planned time, or when caught up
    dst: str | None = None  #: "dst_shifted" | "dst_repeated": a DST change moved it
    late: bool = False  #: started after its misfire grace (caught up after an outage)
    zone: str = "UTC"  #: the schedule's wall clock
    #: with run durations given (testing/overlap.py): when its run ended (or was stopped)
    ended_ms: int | None = None
    buffered: bool = False  #: it waited for the job's active run (overlap buffer_*)
    cancelled: bool = False  #: its run was stopped for a later tick (overlap replace...)

    @property
    def at(self) -> datetime:
        return from_ms(self.at_ms)

    @property
    def local(self) -> datetime:
        return self.at.astimezone(_zone(self.zone))

    @property
    def fired_at(self) -> datetime | None:
        return None if self.fired_ms is None else from_ms(self.fired_ms)

    @property
    def ended_at(self) -> datetime | None:
        return None if self.ended_ms is None else from_ms(self.ended_ms)


def _zone(name: str) -> zoneinfo.ZoneInfo | Any:
    return UTC if name == "UTC" else zoneinfo.ZoneInfo(name)
