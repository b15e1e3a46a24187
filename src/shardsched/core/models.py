"""The one definition of a job, a schedule, a DAG and their policies: what users send.

These msgspec Structs are what the HTTP API decodes, what the SDK takes and what the Lua
boundary stores (as compact JSON). What the surfaces answer is in :mod:`.views`;
validation that msgspec cannot express on its own (cron syntax, time-zone names) is in
:mod:`.validation`, raising the same :class:`msgspec.ValidationError` with a ``$.path``
so every surface reports the field alike.

Persisted Structs evolve by adding fields with defaults; nothing is reordered.
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, TypeVar

import msgspec

from shardsched.core.backlog import Backlog as Backlog
from shardsched.core.backlog import BacklogPolicy as BacklogPolicy
from shardsched.core.calendars import CalendarRule
from shardsched.core.concurrency import KeyTemplate, Limit
from shardsched.core.env_names import EnvMap
from shardsched.core.events import OnRules
from shardsched.core.params import Args
from shardsched.core.queues import DEFAULT_QUEUE, Priority, QueueName
from shardsched.core.schedule_kinds import AwareDatetime as AwareDatetime
from shardsched.core.schedule_kinds import CronSchedule as CronSchedule
from shardsched.core.schedule_kinds import IntervalSchedule as IntervalSchedule
from shardsched.core.schedule_kinds import MultiSchedule as MultiSchedule
from shardsched.core.schedule_kinds import OnceSchedule as OnceSchedule
from shardsched.core.schedule_kinds import Schedule as Schedule
from shardsched.core.schedule_kinds import TriggeredSchedule as TriggeredSchedule
from shardsched.core.schedule_kinds import WindowSchedule as WindowSchedule
from shardsched.core.schedule_kinds import cron_specs as cron_specs
from shardsched.core.schedule_kinds import schedule_zone as schedule_zone
from shardsched.core.text import PRINTABLE

_T = TypeVar("_T")
#: A name is printable text (core/text.py): shown in tables and logs, it must look like
#: what it is.
_PRINTABLE = PRINTABLE
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=_PRINTABLE)]
#: No NUL byte: the kernel ends a command line or an environment string at the first one
#: (a 422 at the edge, not a worker's spawn failure).
_NO_NUL = r"^[^\x00]*$"
Command = Annotated[str, msgspec.Meta(min_length=1, max_length=65536, pattern=_NO_NUL)]
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, le=366 * 86400)]
#: A misfire grace: up to a year (a larger one means "always fire", which catchup all says).
GraceSeconds = Annotated[float, msgspec.Meta(ge=0, le=366 * 86400)]
#: Late ticks a job may owe at most; older ones are recorded skipped (``catchup_limit``).
MaxCatchup = Annotated[int, msgspec.Meta(ge=1, le=100_000)]
DEFAULT_MAX_CATCHUP = 1000
#: A job's spread: its ticks run at a stable offset in [0, spread_s) (core/jitter.py).
SpreadSeconds = Annotated[float, msgspec.Meta(ge=0, le=86400)]
MaxFires = Annotated[int, msgspec.Meta(ge=1, le=1_000_000_000)]
#: A pace: runs started a minute at most (1 a minute to 100 a second).
PerMinute = Annotated[int, msgspec.Meta(ge=1, le=6000)]
#: What paced catch-up (and a paced resume) starts a minute unless the job or call says.
DEFAULT_PER_MINUTE = 60
#: Labels: what an operator tags a job or DAG with (a team, a service, the apply set that
#: manages it: ``shardsched apply --prune`` removes only its own set's).
LabelKey = Annotated[
    str, msgspec.Meta(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$(?!\n)")
]
LabelMap = Annotated[
    dict[LabelKey, Annotated[str, msgspec.Meta(max_length=200, pattern=_PRINTABLE)]],
    msgspec.Meta(max_length=32),
]


class Backoff(enum.StrEnum):
    """How the delay before the next attempt grows."""

    FIXED = "fixed"  #: always base_s
    EXPONENTIAL = "exponential"  #: base_s * 2**(attempt-1), capped by max_s


class RetryPolicy(msgspec.Struct, forbid_unknown_fields=True):
    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1
    backoff: Backoff = Backoff.EXPONENTIAL
    base_s: Annotated[float, msgspec.Meta(ge=0, le=86400)] = 30.0
    max_s: Annotated[float, msgspec.Meta(ge=0, le=7 * 86400)] = 3600.0
    jitter: bool = True


class Catchup(enum.StrEnum):
    """What happens to ticks found late (every node down, a takeover, a long burst)."""

    ALL = "all"  #: fire every missed tick, however late (the newest max_catchup of them)
    LATEST = "latest"  #: of several ticks due at once fire only the latest; record the rest skipped
    NONE = "none"  #: a tick later than misfire_grace_s is recorded skipped, not fired
    #: the ticks owed (the newest max_catchup) run as a paced backfill, at most
    #: catchup_per_minute a minute, while on-time ticks fire on time
    PACED = "paced"


class OnResume(enum.StrEnum):
    """What a resume does with the ticks its pause went over."""

    SKIP = "skip"  #: none of them: fire from now on (the default)
    LATEST = "latest"  #: the latest of them, now
    ALL = "all"  #: all of them (the newest max_catchup), paced as a backfill
    #: all of them as ``all``, at most N a minute (the resume call's ``per_minute``)
    PACED = "paced"


class Overlap(enum.StrEnum):
    """What a tick does when a run of the same job is still active."""

    ALLOW = "allow"  #: run concurrently
    FORBID = "forbid"  #: record the new tick skipped
    REPLACE = "replace"  #: cancel the active run, start the new one
    BUFFER_ONE = "buffer_one"  #: at most one tick waits for the active run; later: skipped
    BUFFER_ALL = "buffer_all"  #: ticks wait in order (up to 1,000; beyond: skipped)
    #: cancel the active run; the new tick runs once its worker has stopped it
    CANCEL_OTHER = "cancel_other"


class TriggerRule(enum.StrEnum):
    """When a DAG task is released, given the terminal states of its dependencies."""

    ALL_SUCCESS = "all_success"  #: every dependency succeeded (the default)
    ALL_DONE = "all_done"  #: every dependency is terminal, whatever the outcome
    ONE_FAILED = "one_failed"  #: at least one dependency failed for good
    NONE_FAILED = "none_failed"  #: every dependency succeeded or was skipped


class JobStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    DELETED = "deleted"


class RunState(enum.StrEnum):
    """A run's state: scheduled → claimed → running → succeeded | failed (retried as the
    next attempt, which starts as retrying) | dead_letter; or skipped, or cancelled; a
    run over its concurrency key's limit goes running → waiting → scheduled."""

    SCHEDULED = "scheduled"
    CLAIMED = "claimed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRYING = "retrying"
    DEAD_LETTER = "dead_letter"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    #: claimed over its concurrency key's limit: waits its turn holding no worker slot,
    #: then is scheduled again (core/concurrency.py)
    WAITING = "waiting"


class Timing(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """When a job fires and what happens to late ticks: all the shard actor needs.

    Stored as its own JSON string beside the spec, so that jobs with the same timing share
    the bytes and the actor's next-fire memo computes each (timing, tick) once.
    """

    schedule: Schedule
    catchup: Catchup = Catchup.ALL
    misfire_grace_s: float = 60.0
    overlap: Overlap = Overlap.ALLOW
    max_catchup: int = DEFAULT_MAX_CATCHUP
    #: the spread (core/jitter.py): timer scores are planned times, ticks nominal
    spread_s: float = 0.0
    starts_ms: int | None = None  #: no tick before
    ends_ms: int | None = None  #: no tick after
    max_fires: int | None = None  #: fire.lua counts its fires and stops it there
    start_deadline_ms: int | None = None  #: fire.lua indexes each run it makes by it
    finish_deadline_ms: int | None = None
    skip_late_start: bool = False
    calendars: CalendarRule | None = None  #: decided at each tick (core/catchup.on_calendar)
    team: str = ""  #: its ACCOUNT_LABEL's value (core/labels.py): its ticks' metric label
    per_minute: int = DEFAULT_PER_MINUTE  #: catchup paced: owed ticks started a minute
    backlog: str = ""  #: its backpressure as fire.lua reads it (BacklogPolicy.code)


class Retention(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """How long a job's (or DAG's) finished runs stay hot in Redis before the owner moves
    them to the cold archive: older than ``max_age_s`` (since they finished), or beyond the
    newest ``max_runs``. Unset fields take the deployment's default (``--retention-s``;
    no count limit). Runs not yet finished and unhandled dead letters always stay."""

    max_age_s: Annotated[int, msgspec.Meta(ge=1, le=10 * 366 * 86400)] | None = None
    max_runs: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] | None = None


class JobSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What a user registers: the body of ``POST /api/v1/jobs``."""

    name: Name
    command: Command
    #: Required, unless ``depends_on`` makes the job a task of its dependencies' DAG, which
    #: then runs it on the DAG's ticks.
    schedule: Schedule | None = None
    timeout_s: PositiveSeconds = 3600.0
    #: When its run is stopped (timeout, cancel), SIGTERM, then SIGKILL after this long.
    kill_grace_s: KillGrace = 10.0
    retry_policy: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    #: Job ids of tasks of one DAG: the new job joins that DAG as task ``name``.
    depends_on: list[Name] = msgspec.field(default_factory=list)
    catchup: Catchup = Catchup.ALL
    misfire_grace_s: GraceSeconds = 60.0
    #: With catchup "all": late ticks owed at most; older ones are recorded skipped.
    max_catchup: MaxCatchup = DEFAULT_MAX_CATCHUP
    overlap: Overlap = Overlap.ALLOW
    lease_s: LeaseSeconds = 30.0
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    #: Opt-in: pause the job (reason recorded) after this many consecutive runs failed for
    #: good (dead-lettered, or failed with no attempt left).
    auto_pause_after: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    #: Environment variables of the job's command, on top of the worker's allowlist.
    env: EnvMap = msgspec.field(default_factory=dict)
    #: How long its finished runs stay hot (unset: the deployment's default).
    retention: Retention | None = None
    labels: LabelMap = msgspec.field(default_factory=dict)
    #: Parameters of its runs (a handler's ``ctx.args``, a command's ``SHARDSCHED_ARGS``);
    #: a manual trigger may give others for its run.
    args: Args = msgspec.field(default_factory=dict)
    queue: QueueName = DEFAULT_QUEUE  #: only workers serving it run the job (core/queues)
    priority: Priority = Priority.NORMAL  #: under contention, higher ones are claimed first
    #: Runs sharing a key are held to its limits (core/concurrency.py); a template over
    #: the job's labels, e.g. ``tenant:{labels.tenant}``, names one key per tenant.
    concurrency_key: KeyTemplate | None = None
    #: The key's limit while the key has none of its own (``PUT /api/v1/concurrency``).
    concurrency_limit: Limit | None = None
    #: Spread the job's ticks: each runs at the job's own stable offset in [0, spread_s)
    #: after its nominal time (derived from its id; its run ids keep the nominal tick).
    spread_s: SpreadSeconds = 0.0
    #: Its ticks only from ``starts_at`` on and up to ``ends_at`` (outside them it has none)
    starts_at: AwareDatetime | None = None
    ends_at: AwareDatetime | None = None
    #: Stop after this many fires (its runs by hand and backfills do not count); the job
    #: then says ``no_next_run: max_fires``. Not retention's ``max_runs``.
    max_fires: MaxFires | None = None
    #: What resuming it does with the ticks its pause went over (a resume may say otherwise)
    on_resume: OnResume = OnResume.SKIP
    #: ``catchup: paced`` and a ``paced`` resume: owed ticks started a minute at most
    catchup_per_minute: PerMinute | None = None
    #: Deadlines, from each tick's planned time: a run not started (or not finished) by
    #: then is flagged on the run, in a metric and as a notification (deadline_missed);
    #: with ``skip_late_start`` a run not started in time is skipped instead, recorded.
    #: A run triggered by hand or by a backfill has no tick of its own: no deadline.
    start_deadline_s: PositiveSeconds | None = None
    finish_deadline_s: PositiveSeconds | None = None
    skip_late_start: bool = False
    #: A dead-man's switch: say so when the job has had no successful run for this long
    #: (including when nothing ran at all), and again each such stretch it stays silent.
    expect_success_within_s: PositiveSeconds | None = None
    #: named calendars its ticks must fall in / must not (core/calendars.py)
    calendars: CalendarRule | None = None
    #: The id to register it under (unset: a random ``job_…``); unique in the namespace.
    #: Not stored in the definition: it is the job's ``job_id``.
    id: JobId | None = None
    #: What else runs it: events it listens to (core/events.py). With ``on`` and no
    #: schedule, it has none: ``{"type": "triggered"}``.
    on: OnRules = msgspec.field(default_factory=list)
    #: Backpressure: what a tick does while its runs are still queued beyond a bound
    backlog: BacklogPolicy | None = None

    def __post_init__(self) -> None:
        if self.schedule is None and self.on and not self.depends_on:
            self.schedule = TriggeredSchedule()


#: A DAG task's name is part of its job id ``<dag_id>.<task>``: no dots, no colons.
TASK_NAME = re.compile(r"^[A-Za-z0-9_-]+$(?!\n)")
TaskName = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=TASK_NAME.pattern)]
LeaseSeconds = Annotated[float, msgspec.Meta(ge=1, le=3600)]
#: From SIGTERM to SIGKILL when a run is stopped (timeout or cancel).
KillGrace = Annotated[float, msgspec.Meta(ge=0, le=3600)]
#: A job id its user chose: letters, digits, '_' and '-' ('.' and ':' separate a task's
#: and a run's parts of an id), not starting with ``dag_``, which marks a DAG's ids.
JOB_ID = re.compile(r"^(?!dag_)[A-Za-z0-9][A-Za-z0-9_-]{0,99}$(?!\n)")
#: A DAG id its user chose: letters, digits, '_' and '-'; stored with a ``dag_`` prefix
#: (core/ids.dag_id_of: ``etl`` is ``dag_etl``, the id its answers show).
DAG_ID = re.compile(r"^(?:dag_[A-Za-z0-9_-]{1,96}|(?!dag_)[A-Za-z0-9][A-Za-z0-9_-]{0,95})$(?!\n)")
JobId = Annotated[str, msgspec.Meta(pattern=JOB_ID.pattern)]
DagId = Annotated[str, msgspec.Meta(pattern=DAG_ID.pattern)]


class TaskSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One task of a DAG: a job that runs when its dependencies allow.

    Stored as the task job's spec, so it carries what a worker needs (command, timeout,
    retry policy, lease) under the same field names as :class:`JobSpec`.
    """

    name: TaskName
    command: Command
    timeout_s: PositiveSeconds = 3600.0
    kill_grace_s: KillGrace = 10.0
    retry_policy: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    depends_on: list[TaskName] = msgspec.field(default_factory=list)
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    lease_s: LeaseSeconds = 30.0
    env: EnvMap = msgspec.field(default_factory=dict)
    queue: QueueName = DEFAULT_QUEUE
    priority: Priority = Priority.NORMAL
    #: A template is over the DAG's labels; stored resolved (ops/dags/manage.py).
    concurrency_key: KeyTemplate | None = None
    concurrency_limit: Limit | None = None


class DagSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``POST /api/v1/dags``.

    ``max_active_runs``: DAG runs at once; a tick that finds that many still active is
    queued (catch-up ``all``), queued replacing older queued ones (``latest``), or skipped
    and recorded (``none``). ``stall_sla_s``: a released task not claimed within this is
    reported stalled (counter ``dag_stalled`` and the task's ``stalled_at``).
    """

    name: Name
    schedule: Schedule
    tasks: Annotated[list[TaskSpec], msgspec.Meta(min_length=1, max_length=1000)]
    max_active_runs: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1
    catchup: Catchup = Catchup.ALL
    misfire_grace_s: GraceSeconds = 60.0
    max_catchup: MaxCatchup = DEFAULT_MAX_CATCHUP
    stall_sla_s: Annotated[float, msgspec.Meta(ge=0.1, le=7 * 86400)] = 300.0
    #: How long its tasks' finished runs stay hot (unset: the deployment's default).
    retention: Retention | None = None
    labels: LabelMap = msgspec.field(default_factory=dict)
    #: The id to register it under (unset: a random ``dag_…``); unique in the namespace.
    id: DagId | None = None
    #: What else opens a DAG run: events and upstream outcomes (core/events.py); with only
    #: these, its schedule is ``{"type": "triggered"}``.
    on: OnRules = msgspec.field(default_factory=list)


class DagRunState(enum.StrEnum):
    QUEUED = "queued"  #: waiting for a free slot under max_active_runs
    RUNNING = "running"
    SUCCEEDED = "succeeded"  #: every task terminal, none failed for good
    FAILED = "failed"  #: every task terminal, at least one failed for good
    SKIPPED = "skipped"  #: a queued run superseded by a later tick (catch-up ``latest``)
    CANCELLED = "cancelled"  #: cancelled by hand (its ``reason`` says who and why)


class TaskState(enum.StrEnum):
    """A task within one DAG run: waiting for its dependencies, then its run's state."""

    WAITING = "waiting"
    SCHEDULED = "scheduled"
    CLAIMED = "claimed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRYING = "retrying"
    DEAD_LETTER = "dead_letter"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class SchedulePreviewRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /api/v1/schedules/preview``."""

    schedule: Schedule
    count: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 10
    after: AwareDatetime | None = None  #: default: now (the server's clock)
    #: whose ``H`` fields and spread offset to show (a job's id; default: as for id "")
    job_id: Annotated[str, msgspec.Meta(max_length=200)] = ""
    spread_s: SpreadSeconds = 0.0  #: show each tick's planned time with this spread
    #: a job's limits, shown in effect: no tick before/after, at most N, on allowed days
    starts_at: AwareDatetime | None = None
    ends_at: AwareDatetime | None = None
    max_fires: MaxFires | None = None
    calendars: CalendarRule | None = None


class ExecSpec(msgspec.Struct):
    """What a worker needs of a job's or a DAG task's spec: decoding only this skips the
    rest of a stored spec quickly."""

    command: str
    timeout_s: float = 3600.0
    kill_grace_s: float = 10.0
    lease_s: float = 30.0
    retry_policy: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    #: the job's args, left encoded: most runs only pass them on
    args: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    #: as the job names it: a job's template is resolved over its labels by the worker
    #: (core/concurrency.py), a DAG task's is stored resolved
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
