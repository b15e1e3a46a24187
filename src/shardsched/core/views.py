"""What the surfaces answer: jobs, runs, DAGs, DAG runs, lists and results.

Read back from Redis by the operations and encoded as-is by the HTTP API; the SDK returns
the same Structs, so one definition serves every client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from shardsched.core.calendars import CalendarRule
from shardsched.core.events import OnRule
from shardsched.core.models import (
    DEFAULT_MAX_CATCHUP,
    BacklogPolicy,
    Catchup,
    DagRunState,
    JobSpec,
    JobStatus,
    OnResume,
    Overlap,
    Retention,
    RetryPolicy,
    RunState,
    Schedule,
    TaskSpec,
    TaskState,
    TriggerRule,
)
from shardsched.core.queues import DEFAULT_QUEUE, Priority


class Job(msgspec.Struct, kw_only=True):
    """A registered job as the API answers it."""

    job_id: str
    name: str
    schedule: Schedule
    command: str
    timeout_s: float
    retry_policy: RetryPolicy
    schedule_words: str = ""  #: its schedule as people say it ("At 04:00", "every 1d")
    depends_on: list[str]
    catchup: Catchup
    misfire_grace_s: float
    overlap: Overlap
    lease_s: float
    status: JobStatus
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int
    shard: int
    dag_id: str | None = None  #: set for a DAG task (job id ``<dag_id>.<task>``)
    trigger_rule: TriggerRule | None = None
    auto_pause_after: int | None = None
    pause_reason: str | None = None
    paused_at: datetime | None = None
    paused_until: datetime | None = None
    max_catchup: int = DEFAULT_MAX_CATCHUP
    env: dict[str, str] = msgspec.field(default_factory=dict)
    retention: Retention | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    args: dict[str, Any] = msgspec.field(default_factory=dict)  #: its runs' parameters
    queue: str = DEFAULT_QUEUE  #: only workers serving it run the job
    priority: Priority = Priority.NORMAL
    concurrency_key: str | None = None  #: as it names it (a template over its labels)
    concurrency_limit: int | None = None
    kill_grace_s: float = 10.0  #: from SIGTERM to SIGKILL when a run is stopped
    spread_s: float = 0.0  #: its ticks run at its stable offset in [0, spread_s)
    #: why an active job has no ``next_run_at``: "exhausted" (its schedule fires no more),
    #: "window_ended" (past its ``ends_at``), "max_fires" (it fired them all)
    no_next_run: str | None = None
    starts_at: datetime | None = None  #: no tick before
    ends_at: datetime | None = None  #: no tick after
    max_fires: int | None = None
    fires_left: int | None = None  #: of max_fires
    on_resume: OnResume = OnResume.SKIP  #: what a resume does with the ticks of the pause
    start_deadline_s: float | None = None
    finish_deadline_s: float | None = None
    skip_late_start: bool = False
    expect_success_within_s: float | None = None
    calendars: CalendarRule | None = None  #: the named calendars it includes, excludes
    catchup_per_minute: int | None = None  #: catchup paced, a paced resume: a minute
    #: 2 and up: its id was deleted and created again (its earlier runs stay in its history)
    incarnation: int = 1
    incarnation_started_at: datetime | None = None  #: when this incarnation began
    #: The stored definition fails a check added since it was written (``$.field:
    #: message``): shown repaired, it may be deleted or replaced (PUT), not patched.
    invalid: str | None = None
    #: its newest runs, newest first, when a list asked for them (``?recent=N``)
    recent_runs: list[RunBrief] | None = None
    #: the events and upstream outcomes that run it
    on: list[OnRule] = msgspec.field(default_factory=list)
    backlog: BacklogPolicy | None = None  #: backpressure: what a tick does when behind


class RunBrief(msgspec.Struct, kw_only=True):
    """A run as a list's sparkline shows it."""

    run_id: str
    state: RunState
    scheduled_for: datetime


class Dag(msgspec.Struct, kw_only=True):
    """A registered DAG as the API answers it."""

    dag_id: str
    name: str
    schedule: Schedule
    schedule_words: str = ""  #: its schedule as people say it ("At 03:00")
    tasks: list[TaskSpec]
    task_job_ids: dict[str, str]
    max_active_runs: int
    catchup: Catchup
    misfire_grace_s: float
    stall_sla_s: float
    status: JobStatus
    next_run_at: datetime | None
    active_runs: int
    queued_runs: int
    stalled_tasks: int  #: task runs ever reported stalled (released, unclaimed past the SLA)
    created_at: datetime
    updated_at: datetime
    version: int
    shard: int
    max_catchup: int = DEFAULT_MAX_CATCHUP
    retention: Retention | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    args: dict[str, Any] = msgspec.field(default_factory=dict)  #: its runs' parameters
    incarnation: int = 1  #: 2 and up: its id was deleted and created again
    incarnation_started_at: datetime | None = None
    #: the events and upstream outcomes that open a run of it
    on: list[OnRule] = msgspec.field(default_factory=list)


class DagCreated(msgspec.Struct):
    dag_id: str
    next_run_at: datetime | None
    task_job_ids: dict[str, str]


class DagList(msgspec.Struct):
    dags: list[Dag]
    next_cursor: str | None = None


class DagTaskRun(msgspec.Struct, kw_only=True):
    """One task within one DAG run, with every attempt it has had."""

    task: str
    job_id: str
    state: TaskState
    run_id: str | None = None  #: the latest attempt's run id, once released or skipped
    attempts: list[Run] = msgspec.field(default_factory=list)
    released_at: datetime | None = None
    stalled_at: datetime | None = None
    reason: str | None = None


class DagRun(msgspec.Struct, kw_only=True):
    dag_run_id: str
    dag_id: str
    scheduled_for: datetime
    state: DagRunState
    manual: bool
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reason: str | None = None
    tasks: list[DagTaskRun] = msgspec.field(default_factory=list)
    #: Read from the cold archive (it left Redis under the DAG's retention).
    archived: bool = False
    #: what opened it, if an event or an upstream's outcome did (``event:<id>``,
    #: ``after:<run id>``)
    cause: str | None = None


class DagRunList(msgspec.Struct):
    dag_runs: list[DagRun]
    next_cursor: str | None = None


class DagTriggered(msgspec.Struct):
    dag_run_id: str
    scheduled_for: datetime
    state: DagRunState


class JobVersion(msgspec.Struct, kw_only=True):
    """One definition a job had: from when (``valid_from``) until the next (None: current)."""

    version: int
    status: JobStatus
    spec: JobSpec
    valid_from: datetime
    valid_until: datetime | None = None
    changed_by: str | None = None  #: who made this version (None: not recorded)


class JobVersions(msgspec.Struct):
    job_id: str
    versions: list[JobVersion]  #: oldest first


class Change(msgspec.Struct, kw_only=True):
    """One entry of a job's or DAG's change log: who did what, when."""

    at: datetime
    #: create, update, pause, resume, delete, trigger, backfill, retry, add_task, repair
    action: str
    by: str | None  #: a token's name, an SDK client's actor, or "scheduler"
    version: int | None = None  #: the version it made (None: it made none, e.g. a trigger)
    detail: str | None = None  #: the run it started, the window, the pause reason…


class ChangeList(msgspec.Struct):
    id: str
    changes: list[Change]  #: newest first
    next_cursor: str | None = None


class Event(msgspec.Struct, kw_only=True):
    """One state change of a run (or of a DAG run), from its shard's event stream."""

    at: datetime  #: the server's time of the change
    run_id: str  #: a run, or a DAG run (``<dag_id>:<tick>``) for the DAG run's own change
    job_id: str
    dag_run_id: str | None = None  #: the DAG run of a DAG task's run
    attempt: int | None = None
    old: str | None = None  #: None: the run was just made
    new: str  #: scheduled, running, succeeded, failed, retrying, dead_letter, skipped, …
    worker: str | None = None
    detail: str | None = None  #: reclaimed, released, replaced, a skip's reason and count…
    cursor: str  #: pass as ``after`` to continue after this event


class EventList(msgspec.Struct):
    events: list[Event]  #: oldest first
    next_cursor: str | None = None  #: where to continue (also when caught up: poll it)


class JobCreated(msgspec.Struct, gc=False):  # untracked by the gc: a bulk makes one a job
    """The seed's create answer."""

    job_id: str
    next_run_at: datetime | None
    #: the id was a deleted job's: this is its new incarnation (its history stays)
    recreated: bool = False


class Run(msgspec.Struct, kw_only=True):
    """One run record of the ledger."""

    run_id: str
    job_id: str
    dag_run_id: str | None = None
    scheduled_for: datetime
    state: RunState
    attempt: int
    claimed_by: str | None = None
    lease_expires_at: datetime | None = None  #: while claimed or running only
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    reason: str | None = None
    job_version: int | None = None  #: the job's version it ran with (set when claimed)
    #: Read from the cold archive (it left Redis under the job's retention).
    archived: bool = False
    #: The next attempt, when this one failed and is retried (``<job>:<tick>:<n+1>``).
    next_run_id: str | None = None
    #: The args a trigger gave this run instead of its job's (kept by its retries); None:
    #: the job's, or its DAG run's
    args: dict[str, Any] | None = None
    queue: str = DEFAULT_QUEUE  #: the queue it was put on (its job's then)
    priority: Priority = Priority.NORMAL  #: and its priority (a backfill's: low)
    #: the concurrency key it is held to (resolved; its state ``waiting`` while over it)
    concurrency_key: str | None = None
    #: who cancelled it (its ``reason`` says why); None unless ``cancelled`` by hand
    cancelled_by: str | None = None
    #: lists across jobs (the failure inbox, runs under way): its job's (or DAG's) name
    job_name: str | None = None
    #: the failure inbox: the last few hundred bytes it printed
    output_tail: str | None = None
    #: its firing's trace id (32 hex): the same whether or not tracing
    #: is on, since every process derives it from the run id (docs/tracing.md)
    trace_id: str | None = None
    #: when its tick was planned to run, if not at ``scheduled_for``: the nominal tick plus
    #: its job's spread offset (``spread_s``; not kept by the cold archive)
    planned_for: datetime | None = None
    #: which of its job's deadlines it missed (``start``: not started by its
    #: ``start_deadline_s``; ``finish``: not finished by its ``finish_deadline_s``)
    deadline_missed: str | None = None
    #: where to see that trace, when the API is given SHARDSCHED_TRACE_URL
    trace_url: str | None = None
    #: what made it, if not its schedule or a hand: ``event:<event id>`` (an event or a
    #: hook), ``after:<run id>`` (an upstream's outcome; a DAG run's id for a DAG's)
    cause: str | None = None
    #: the later ticks it stands for: coalesced into it while it was queued (backlog);
    #: about the first 1,000 listed, ``stands_for_count`` all of them
    stands_for: list[datetime] | None = None
    stands_for_count: int | None = None


class RetryRefusal(msgspec.Struct):
    run_id: str
    reason: str  #: why not, and what to do instead


class BulkRetry(msgspec.Struct):
    """What a retry of many dead-lettered runs did (or, as a dry run, would do)."""

    dry_run: bool
    retried: list[Run]  #: each run's new attempt
    would_retry: list[str]  #: a dry run's: the runs it would retry
    refused: list[RetryRefusal]


class RunList(msgspec.Struct):
    runs: list[Run]
    next_cursor: str | None = None  #: pass as ?cursor= for the next page; None on the last


class LagPoint(msgspec.Struct, kw_only=True):
    """One node's trigger lag over the minute before ``at`` (None: it fired nothing)."""

    at: datetime
    node_id: str
    p50_s: float | None
    p99_s: float | None
    fired_1m: int


class LagHistory(msgspec.Struct, kw_only=True):
    """GET /api/v1/status/lag: the nodes' lag samples, oldest first."""

    points: list[LagPoint]
    truncated: bool = False  #: the window held more than one answer's worth


class JobList(msgspec.Struct):
    jobs: list[Job]
    next_cursor: str | None = None


class RunOutput(msgspec.Struct):
    """What a run printed: the last 64 KiB of it (``truncated`` when it printed more);
    while it runs, what its worker wrote so far (every few seconds)."""

    run_id: str
    output: str
    truncated: bool
    total_bytes: int = 0  #: bytes printed in all; ``output`` is their tail
    state: str | None = None  #: the run's state when read
    #: which output quota cut what Redis keeps (``job`` | ``deployment``), if one did
    quota: str | None = None


class Triggered(msgspec.Struct, omit_defaults=True):
    run_id: str
    scheduled_for: datetime
    #: True: the idempotency key was used before; ``run_id`` is that trigger's run
    repeated: bool = False


class FireTime(msgspec.Struct):
    at: datetime  #: UTC
    local: datetime  #: the same instant on the schedule's wall clock (with its offset)
    dst: str | None = None  #: "dst_shifted" (moved past a gap) | "dst_repeated" (2nd of 2)
    planned: datetime | None = None  #: with a spread: when the tick runs (UTC)
    window_closes: datetime | None = None  #: a window schedule's: its run starts by then


class SuppressedTime(msgspec.Struct):
    wall_time: str  #: the matching wall-clock time that does not fire
    #: "dst_gap" (does not exist) | "dst_repeat_skipped" (its second occurrence) |
    #: "dst_first_skipped" (its first occurrence, under `repeat: second`) | "calendar"
    #: (a day its calendars do not allow: skipped, recorded, when it comes)
    reason: str


class SchedulePreview(msgspec.Struct):
    fire_times: list[FireTime]
    suppressed: list[SuppressedTime]
    #: why fewer than ``count`` came: "window_ended" (past ``ends_at``), "max_fires",
    #: "exhausted" (the schedule fires no more), "calendar" (no allowed day in reach)
    stops: str | None = None
