"""What the surfaces answer about a job's time: a backfill (and the ticks it picked), a
job's ticks counted (``/stats``), a resume with its owed ticks, and its upcoming fires."""

from __future__ import annotations

from datetime import datetime

import msgspec

from shardsched.core.models import JobStatus
from shardsched.core.views import FireTime, Job, SuppressedTime


class BackfillTick(msgspec.Struct, omit_defaults=True):
    """A tick a backfill runs (or, dry, would run), and why."""

    tick: datetime
    gap: str  #: missing | skipped | failed
    reason: str | None = None  #: a skipped tick's recorded reason
    run_id: str | None = None  #: a failed tick's last attempt, run again as the next one


class BackfillResult(msgspec.Struct):
    job_id: str
    ticks: int  #: nominal ticks in the window
    queued: int  #: of them, newly queued for a run
    already: int  #: of them, with a run (or queued) already: left alone
    started: int  #: runs started at once (the rest follow as these end)
    retried: int = 0  #: failed ticks sent back as a new attempt (``only`` with failed)
    dry_run: bool = False
    #: with ``only`` or ``dry_run``: the ticks picked (at most MAX_LISTED; see ``picked``)
    listed: list[BackfillTick] | None = None
    picked: int | None = None  #: how many ticks were picked in all


class JobStats(msgspec.Struct):
    """A job's ticks over a window, counted from its ledger (``GET /jobs/{id}/stats``)."""

    job_id: str
    since: datetime
    until: datetime
    ticks: int  #: nominal ticks in the window
    fired: int  #: of them, with a run
    late: int  #: of the fired, later than the misfire grace after their planned time
    skipped: dict[str, int]  #: by reason (overlap, misfire, catchup_latest, dst_gap, …)
    missed: int  #: no run and no recorded decision (the audit's missing)
    pending: int
    duplicated: int
    configured_every_s: float | None  #: the mean time between its ticks in the window
    effective_every_s: float | None  #: the mean time between its fired ticks
    #: e.g. "configured every 20s, effective every 1m: 40 skipped by overlap"
    summary: str


class ResumeResult(msgspec.Struct):
    """What a resume did (or, dry, would do) with the ticks its pause went over."""

    job_id: str
    catchup: str  #: skip | latest | all
    owed: list[datetime]  #: the ticks of the pause it runs (the newest max_catchup at most)
    dry_run: bool
    job: Job | None = None  #: the job, resumed (None on a dry run)
    queued: int = 0  #: of the owed ticks, queued for a run (the rest had one)


class JobUpcoming(msgspec.Struct):
    """A job's next fires as it will fire them (``GET /jobs/{id}/upcoming``): from its
    next tick on, with its window, fires left, calendars and pause in effect."""

    job_id: str
    status: JobStatus
    schedule_words: str  #: its schedule as people say it ("At 04:00", "every 1d")
    fire_times: list[FireTime]
    suppressed: list[SuppressedTime]
    #: why fewer came than asked: "paused" (until resumed), "deleted", "max_fires",
    #: "window_ended", "exhausted", "calendar" (no allowed day in reach), "not_planned"
    stops: str | None = None
    resumes_at: datetime | None = None  #: paused until then: the fires are from then on
