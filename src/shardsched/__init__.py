"""shardsched: a distributed cron and DAG scheduler, sharded trio actors on Redis."""

from typing import TYPE_CHECKING

from shardsched._version import __version__
from shardsched.core.apps import App
from shardsched.core.calendars import Calendar, CalendarRule, DateRange, Weekday
from shardsched.core.cron import CronDialect
from shardsched.core.dst_policy import DstPolicy
from shardsched.core.errors import (
    AlreadyRetried,
    BulkPartiallyApplied,
    ConflictError,
    DagDeleted,
    DagNotFound,
    DagRunNotFound,
    DagTaskJob,
    Forbidden,
    HttpError,
    IdempotencyKeyReused,
    IdTaken,
    JobDeleted,
    JobNotFound,
    NameTaken,
    NotFoundError,
    NotOwned,
    PreconditionFailed,
    RedisUnavailable,
    RunNotFound,
    ShardschedError,
    Superseded,
    Unauthenticated,
    Unreachable,
    ValidationError,
)
from shardsched.core.events import EventNotFound, OnRule, ReceivedEvent
from shardsched.core.hooks import HookSpec
from shardsched.core.models import (
    CronSchedule,
    DagSpec,
    IntervalSchedule,
    JobSpec,
    MultiSchedule,
    OnceSchedule,
    RetryPolicy,
    RunState,
    TaskSpec,
    TriggeredSchedule,
    TriggerRule,
    WindowSchedule,
)
from shardsched.core.patches import JobPatch
from shardsched.core.views import Dag, DagRun, Job, Run

if TYPE_CHECKING:
    from shardsched.sdk import AsyncClient, Client


def __getattr__(name: str) -> object:
    # The SDK pulls in redis-py; service processes that never use it don't pay for it.
    if name in ("Client", "AsyncClient"):
        from shardsched import sdk

        return getattr(sdk, name)
    raise AttributeError(name)


__all__ = [
    "AlreadyRetried",
    "App",
    "AsyncClient",
    "BulkPartiallyApplied",
    "Calendar",
    "CalendarRule",
    "Client",
    "ConflictError",
    "CronDialect",
    "CronSchedule",
    "Dag",
    "DagDeleted",
    "DagNotFound",
    "DagRun",
    "DagRunNotFound",
    "DagSpec",
    "DagTaskJob",
    "DateRange",
    "DstPolicy",
    "EventNotFound",
    "Forbidden",
    "HookSpec",
    "HttpError",
    "IdTaken",
    "IdempotencyKeyReused",
    "IntervalSchedule",
    "Job",
    "JobDeleted",
    "JobNotFound",
    "JobPatch",
    "JobSpec",
    "MultiSchedule",
    "NameTaken",
    "NotFoundError",
    "NotOwned",
    "OnRule",
    "OnceSchedule",
    "PreconditionFailed",
    "ReceivedEvent",
    "RedisUnavailable",
    "RetryPolicy",
    "Run",
    "RunNotFound",
    "RunState",
    "ShardschedError",
    "Superseded",
    "TaskSpec",
    "TriggerRule",
    "TriggeredSchedule",
    "Unauthenticated",
    "Unreachable",
    "ValidationError",
    "Weekday",
    "WindowSchedule",
    "__version__",
]
