"""The schemas of the API that are not the data model: the query strings of the list
endpoints, the error shape, and the health answers, as msgspec Structs.

Decoded with ``msgspec.convert(..., strict=False)`` so numbers, times and enums arrive typed,
an unknown parameter is a 422 naming it, and the OpenAPI document describes exactly these.
An absent parameter is UNSET (never None: lax conversion would read the text "null" as
None); :func:`opt` turns it into None for the operations.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from shardsched.core.models import AwareDatetime, JobStatus, Name, RunState

T = TypeVar("T")

#: Largest page any list answers, and the page every list answers unless told.
MAX_PAGE = 1000
DEFAULT_PAGE = 50
PageSize = Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE)]
CursorText = Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]
Prefix = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


#: A list's label filter: ``key:value[,key:value…]`` (core/labels.parse_label_filter).
LabelFilter = Annotated[str, msgspec.Meta(min_length=3, max_length=2000)]


class JobQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/jobs: newest first."""

    limit: PageSize = DEFAULT_PAGE
    cursor: CursorText | UnsetType = UNSET
    status: JobStatus | UnsetType = UNSET
    name_prefix: Prefix | UnsetType = UNSET
    #: the jobs of exactly this name (from the shards' index of names; one page, no cursor)
    name: Name | UnsetType = UNSET
    include_deleted: bool = False  #: deleted jobs are left out unless asked for
    #: ``key:value`` pairs, comma-separated: jobs with every one (``team:payments``)
    label: LabelFilter | UnsetType = UNSET
    queue: Annotated[str, msgspec.Meta(max_length=64)] | UnsetType = UNSET
    #: ``failing``: its newest run failed for good; ``late``: its next fire is over a
    #: minute behind the server's clock (no owner fired it)
    health: Literal["failing", "late"] | UnsetType = UNSET
    #: each job with its newest runs (at most this many; 0: none), for a sparkline
    recent: Annotated[int, msgspec.Meta(ge=0, le=50)] = 0


class LagQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/status/lag: the samples in [since, until] (default the last hour)."""

    since: AwareDatetime | UnsetType = UNSET
    until: AwareDatetime | UnsetType = UNSET


class DeliveryQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/notifications/deliveries."""

    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50
    channel: str | UnsetType = UNSET
    state: Literal["pending", "retrying", "delivered", "failed"] | UnsetType = UNSET


class CreateQuery(msgspec.Struct, forbid_unknown_fields=True):
    """POST /api/v1/jobs."""

    #: refuse the job (409) if a job not deleted has its name already
    unique_name: bool = False


class PutQuery(msgspec.Struct, forbid_unknown_fields=True):
    """PUT /api/v1/jobs/{id}."""

    #: a job this put creates is created paused: no tick fires before (an existing
    #: job's state stays as it is)
    paused: bool = False


class RunQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/jobs/{id}/runs: newest first by scheduled_for; since/until bound it."""

    limit: PageSize = DEFAULT_PAGE
    cursor: CursorText | UnsetType = UNSET
    state: RunState | UnsetType = UNSET
    since: AwareDatetime | UnsetType = UNSET
    until: AwareDatetime | UnsetType = UNSET


IdText = Annotated[str, msgspec.Meta(min_length=1, max_length=400)]


class EventQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/events (and /events/stream): oldest first after ``after`` (a cursor) or
    from ``since``; by job (a DAG's id: its tasks and DAG runs too), run, new state."""

    limit: PageSize = DEFAULT_PAGE
    after: Annotated[str, msgspec.Meta(max_length=80)] | UnsetType = UNSET
    since: AwareDatetime | UnsetType = UNSET
    job_id: IdText | UnsetType = UNSET
    run_id: IdText | UnsetType = UNSET
    state: Annotated[str, msgspec.Meta(max_length=20, pattern="^[a-z_]+$(?!\n)")] | UnsetType = (
        UNSET
    )


class FailureQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/runs: failed and dead-lettered runs of every job, most recently ended
    first; ``state`` is either or both, comma-separated; since/until bound the end. Or,
    with ``state`` one of running, queued, waiting, retrying: the runs under way in that
    state across jobs (ops/runs/active.py), filtered by job, queue, worker and label."""

    limit: PageSize = DEFAULT_PAGE
    cursor: CursorText | UnsetType = UNSET
    state: Annotated[str, msgspec.Meta(pattern=r"^[a-z_]+(,[a-z_]+)*$(?!\n)")] = (
        "failed,dead_letter"
    )
    since: AwareDatetime | UnsetType = UNSET
    until: AwareDatetime | UnsetType = UNSET
    name_prefix: Prefix | UnsetType = UNSET
    job: IdText | UnsetType = UNSET  #: runs under way: of this job (a DAG: its tasks')
    queue: Annotated[str, msgspec.Meta(max_length=200)] | UnsetType = UNSET
    worker: IdText | UnsetType = UNSET
    label: LabelFilter | UnsetType = UNSET


class DeadLetterQuery(msgspec.Struct, forbid_unknown_fields=True):
    limit: PageSize = DEFAULT_PAGE
    cursor: CursorText | UnsetType = UNSET


class ChangeQuery(msgspec.Struct, forbid_unknown_fields=True):
    """A page of a change log, newest first."""

    limit: PageSize = DEFAULT_PAGE
    cursor: CursorText | UnsetType = UNSET


class TokenLogQuery(msgspec.Struct, forbid_unknown_fields=True):
    """The newest entries of the token log."""

    limit: PageSize = DEFAULT_PAGE


class DagQuery(msgspec.Struct, forbid_unknown_fields=True):
    limit: PageSize = DEFAULT_PAGE
    cursor: CursorText | UnsetType = UNSET
    status: JobStatus | UnsetType = UNSET
    name_prefix: Prefix | UnsetType = UNSET
    include_deleted: bool = False  #: deleted DAGs are left out unless asked for
    #: ``key:value`` pairs, comma-separated: DAGs with every one
    label: LabelFilter | UnsetType = UNSET


class DagRunQuery(msgspec.Struct, forbid_unknown_fields=True):
    limit: PageSize = DEFAULT_PAGE
    cursor: CursorText | UnsetType = UNSET
    since: AwareDatetime | UnsetType = UNSET
    until: AwareDatetime | UnsetType = UNSET


class TicksQuery(msgspec.Struct, forbid_unknown_fields=True, rename={"from_": "from"}):
    """GET /api/v1/jobs/{id}/ticks: every nominal tick in [since, until] and its fate
    (``from`` and ``to``: the old names, for one more version, with a Deprecation header)."""

    since: AwareDatetime | UnsetType = UNSET
    until: AwareDatetime | UnsetType = UNSET
    limit: Annotated[int, msgspec.Meta(ge=1, le=10000)] = 1000
    from_: AwareDatetime | UnsetType = UNSET
    to: AwareDatetime | UnsetType = UNSET

    def window(self) -> tuple[AwareDatetime | UnsetType, AwareDatetime | UnsetType, bool]:
        """(since, until, whether an old name was used)."""
        old = not isinstance(self.from_, UnsetType) or not isinstance(self.to, UnsetType)
        since = self.from_ if isinstance(self.since, UnsetType) else self.since
        until = self.to if isinstance(self.until, UnsetType) else self.until
        return since, until, old


class StatsQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/jobs/{id}/stats: the ticks of [since, until] (default the last day)."""

    since: AwareDatetime | UnsetType = UNSET
    until: AwareDatetime | UnsetType = UNSET


class UpcomingQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/jobs/{id}/upcoming: how many of its next fires."""

    count: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 10


class AuditQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/audit: ticks due within the last ``settle_s`` are in flight, not owed;
    a run later than ``late_after_s`` is late; one fired and idle ``stranded_after_s``."""

    settle_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 2.0
    late_after_s: Annotated[float, msgspec.Meta(ge=0, le=86400)] = 1.0
    stranded_after_s: Annotated[float, msgspec.Meta(ge=1, le=86400)] = 300.0
    #: expect a cron schedule's ticks from the slow reference model, not the engine
    reference: bool = False


def opt(value: T | UnsetType) -> T | None:
    """None for an absent (UNSET) parameter, else the value."""
    return None if isinstance(value, UnsetType) else value


class ErrorDetail(msgspec.Struct):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorBody(msgspec.Struct):
    """Every error answer: ``{"error": {"code", "message", "details"}}``."""

    error: ErrorDetail


class Health(msgspec.Struct):
    status: str


class Readiness(msgspec.Struct):
    ready: bool
    shards: int
    owned: int
    unowned: list[int]
    owners: dict[str, str]
    #: this process is stopping (SIGTERM): it finishes what it holds and takes nothing new
    stopping: bool = False
    #: the Redis this process uses: a server, a cluster, or the primary the sentinels name
    redis: str = ""


class ReceivedQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/events/received: the events received, newest first; ``before`` a
    page's ``next_cursor``; ``name`` one event's only."""

    limit: PageSize = DEFAULT_PAGE
    before: (
        Annotated[
            str, msgspec.Meta(max_length=60, pattern=r"^[0-9]{1,15}(:ev_[0-9a-f]{20})?$(?!\n)")
        ]
        | UnsetType
    ) = UNSET
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] | UnsetType = UNSET
