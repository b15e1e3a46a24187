"""Per-team tick accounting for an owner's fire batch: what each tick became (fired, late,
skipped with its reason), counted in ``shardsched_schedule_ticks_total`` by the job's team
label (core/labels.ACCOUNT_LABEL, carried in its timing), never by job: 500,000 jobs make
as many series as they have teams.

The owner's plan says which ticks it fires and which its catch-up, window and calendar
decisions skip; fire.lua then says which of the planned fires an overlap policy held
back (forbid, a full buffer). The batch is counted once that reply is in, so a tick is
counted under one outcome."""

from __future__ import annotations

from shardsched.runtime.metrics import Metrics

NO_TEAM = "none"


class BatchAccount:
    """The tick outcomes of one planned batch, by team, until the fire reply is in."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str], int] = {}

    def _add(self, team: str, outcome: str, reason: str, n: int) -> None:
        key = (team or NO_TEAM, outcome, reason)
        self._counts[key] = self._counts.get(key, 0) + n

    def planned(self, team: str, fires: bool, late: bool, skip: str | None) -> None:
        """One planned item: ``skip`` is its skip record ("first:last:count:reason")."""
        if fires:
            self._add(team, "late" if late else "fired", "", 1)
        if skip:
            _, _, count, reason = skip.split(":", 3)
            self._add(team, "skipped", reason, int(count))

    def overlapped(self, team: str, reason: str) -> None:
        """fire.lua's overlap policy did not fire a planned tick of a job of ``team``."""
        for outcome in ("fired", "late"):
            key = (team or NO_TEAM, outcome, "")
            if self._counts.get(key, 0) > 0:
                self._counts[key] -= 1
                break
        self._add(team, "skipped", reason, 1)

    def flush(self, metrics: Metrics) -> None:
        for (team, outcome, reason), n in self._counts.items():
            if n > 0:
                metrics.schedule_ticks.labels(metrics.team_label(team), outcome, reason).inc(n)
        self._counts.clear()
