"""What a PATCH says: any subset of a job's (or a DAG's) definition, or a change of its
status. A field left out (None) is left as it is."""

from __future__ import annotations

from typing import Annotated

import msgspec

from shardsched.core.calendars import CalendarRule
from shardsched.core.concurrency import KeyTemplate, Limit
from shardsched.core.env_names import EnvMap
from shardsched.core.events import OnRules
from shardsched.core.models import (
    AwareDatetime,
    BacklogPolicy,
    Catchup,
    Command,
    GraceSeconds,
    JobStatus,
    KillGrace,
    LabelMap,
    MaxCatchup,
    MaxFires,
    Name,
    OnResume,
    Overlap,
    PerMinute,
    PositiveSeconds,
    Retention,
    RetryPolicy,
    Schedule,
    SpreadSeconds,
)
from shardsched.core.params import Args
from shardsched.core.queues import Priority, QueueName
from shardsched.core.text import Reason


class JobPatch(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``PATCH /api/v1/jobs/{id}``: any subset of the spec, or a status change."""

    name: Name | None = None
    schedule: Schedule | None = None
    command: Command | None = None
    timeout_s: PositiveSeconds | None = None
    kill_grace_s: KillGrace | None = None
    retry_policy: RetryPolicy | None = None
    depends_on: list[Name] | None = None
    catchup: Catchup | None = None
    misfire_grace_s: GraceSeconds | None = None
    max_catchup: MaxCatchup | None = None
    overlap: Overlap | None = None
    lease_s: Annotated[float, msgspec.Meta(ge=1, le=3600)] | None = None
    auto_pause_after: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    env: EnvMap | None = None  #: replaces the whole map ({} clears it)
    retention: Retention | None = None  #: replaces the whole policy ({} for the defaults)
    labels: LabelMap | None = None  #: replaces the whole map ({} clears it)
    queue: QueueName | None = None
    priority: Priority | None = None
    concurrency_key: KeyTemplate | None = None
    concurrency_limit: Limit | None = None
    args: Args | None = None  #: replaces the whole object ({} clears it)
    spread_s: SpreadSeconds | None = None
    starts_at: AwareDatetime | None = None
    ends_at: AwareDatetime | None = None
    max_fires: MaxFires | None = None
    on_resume: OnResume | None = None
    start_deadline_s: PositiveSeconds | None = None
    finish_deadline_s: PositiveSeconds | None = None
    skip_late_start: bool | None = None
    expect_success_within_s: PositiveSeconds | None = None
    calendars: CalendarRule | None = None  #: replaces the whole rule ({} clears it)
    catchup_per_minute: PerMinute | None = None
    on: OnRules | None = None  #: replaces the whole list ([] clears it)
    backlog: BacklogPolicy | None = None  #: replaces the policy ({} for queue)
    status: JobStatus | None = None
    #: With status "paused" (or on a paused job): why, shown on the job.
    pause_reason: Reason | None = None
    #: With status "paused": resume by itself then (the shard owner does it).
    paused_until: AwareDatetime | None = None


class DagPatch(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``PATCH /api/v1/dags/{id}``: pause or resume."""

    status: JobStatus
