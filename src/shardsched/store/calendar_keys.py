"""The deployment's keys of named calendars (core/calendars.py), in the ``{g}`` hash slot:
the calendars an operator manages and a version every change bumps, which each node
watches to reload its copy (shard/calendar_book.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CalendarKeys:
    base: str  #: the deployment-wide prefix, ``<ns>:{g}:``

    @property
    def book(self) -> str:
        """HASH calendar name -> core.calendars.Calendar JSON."""
        return self.base + "calendars"

    @property
    def version(self) -> str:
        """STRING a counter each change of a calendar increments (INCR)."""
        return self.base + "calv"
