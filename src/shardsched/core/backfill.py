"""A backfill's request: which window of a job's nominal ticks to run, how many at once,
and at what priority (low unless asked: a backfill never delays scheduled runs)."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated

import msgspec

from shardsched.core.models import DEFAULT_PER_MINUTE as DEFAULT_PER_MINUTE
from shardsched.core.models import AwareDatetime, OnResume, PerMinute
from shardsched.core.queues import Priority


class Gap(enum.StrEnum):
    """Which ticks of the window a backfill runs, as the ledger shows them."""

    MISSING = "missing"  #: no run and no recorded decision: lost (the audit's missing)
    SKIPPED = "skipped"  #: skipped by a recorded policy decision (overlap, catch-up, …)
    #: its run ended badly (dead-lettered, or failed for good): run again as a new attempt
    FAILED = "failed"


#: What a backfill runs unless told: every tick without a run.
NO_RUN = (Gap.MISSING, Gap.SKIPPED)


def pace_ms(per_minute: int | None) -> int:
    """The ms between two paced releases (0: not paced)."""
    return 0 if per_minute is None else max(1, round(60_000 / per_minute))


class BackfillRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``POST /api/v1/jobs/{id}/backfill``: run every nominal tick in
    [since, until] that has no run yet, at most ``max_concurrent`` at a time.

    ``start`` and ``end`` are the window's old names, taken for one more version (the
    answer then carries a ``Deprecation`` header)."""

    since: AwareDatetime | None = None
    until: AwareDatetime | None = None
    max_concurrent: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 1
    start: AwareDatetime | None = None  #: deprecated: since
    end: AwareDatetime | None = None  #: deprecated: until
    #: its runs' priority (core/queues.py): low by default, so it never delays scheduled runs
    priority: Priority = Priority.LOW
    #: only these ticks (default: every tick without a run, ``missing`` and ``skipped``);
    #: a DST decision (``dst_*``) is never a gap: it is the schedule's own
    only: Annotated[list[Gap], msgspec.Meta(min_length=1, max_length=3)] | None = None
    dry_run: bool = False  #: list what would run, write nothing
    #: paced: at most this many of its runs started a minute (the owner's pacer releases
    #: them), beside ``max_concurrent``; unset: each as a place frees
    per_minute: PerMinute | None = None

    def __post_init__(self) -> None:
        for new, old in (("since", "start"), ("until", "end")):
            given = (getattr(self, new), getattr(self, old))
            if None not in given:
                raise ValueError(f"{old} is the old name of {new}: give one - at `$.{old}`")
            if given == (None, None):
                raise ValueError(f"Object missing required field `{new}`")

    @property
    def first(self) -> datetime:
        """The window's start (``since``, or its old name ``start``)."""
        first = self.since or self.start
        assert first is not None  # __post_init__
        return first

    @property
    def last(self) -> datetime:
        """The window's end (``until``, or its old name ``end``)."""
        last = self.until or self.end
        assert last is not None  # __post_init__
        return last

    @property
    def deprecated(self) -> bool:
        """The window was given by its old names."""
        return self.start is not None or self.end is not None


class ResumeRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``POST /api/v1/jobs/{id}/resume``: resume a paused job, and run the
    ticks its pause went over as ``catchup`` says (default: the job's ``on_resume``), at
    most ``max_concurrent`` at a time (``paced``: and ``per_minute`` a minute); ``dry_run``
    lists them and changes nothing."""

    catchup: OnResume | None = None
    dry_run: bool = False
    max_concurrent: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 1
    #: with ``paced``: at most this many a minute (default DEFAULT_PER_MINUTE)
    per_minute: PerMinute | None = None
