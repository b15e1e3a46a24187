"""The exceptions shardsched raises; one root so callers can catch everything of ours."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec


class ShardschedError(Exception):
    """Root of every error raised by shardsched."""


class ValidationError(ShardschedError, msgspec.ValidationError):
    """Raised when a job, schedule or request body is invalid; ``field`` is its $.path.

    A msgspec.ValidationError (so a ValueError) too: one ``except`` catches both kinds."""

    def __init__(self, message: str, field: str | None = None) -> None:
        # said as msgspec says it, so a printed error names its field too
        super().__init__(message if field in (None, "$") else f"{message} - at `{field}`")
        self.message = message
        self.field = field


class NotFoundError(ShardschedError, LookupError):
    """Raised when a job, run or DAG does not exist."""


class JobNotFound(NotFoundError):
    """Raised when no job has the given id."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} not found")
        self.job_id = job_id


class RunNotFound(NotFoundError):
    """Raised when no run has the given id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


class EventNotFound(NotFoundError):
    """Raised when no event received has the given id (or it expired)."""

    def __init__(self, event_id: str) -> None:
        super().__init__(f"event {event_id!r} not found")
        self.event_id = event_id


class HookNotFound(NotFoundError):
    """Raised when no hook has the given name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"hook {name!r} not found")
        self.hook = name


class ConflictError(ShardschedError):
    """Raised when the request conflicts with the current state (a deleted job, a race)."""


class AlreadyRetried(ConflictError):
    """Raised when a run that was already sent back from the dead letter is retried again:
    nothing is done (a second click must not run the job twice)."""

    def __init__(self, run_id: str, next_run_id: str) -> None:
        super().__init__(f"run {run_id!r} was already retried as {next_run_id!r}")
        self.run_id = run_id
        self.next_run_id = next_run_id


class IdempotencyKeyReused(ConflictError):
    """Raised when a trigger repeats an idempotency key with other args than the trigger
    that first used it: the first run stands, and the caller hears that this one is not
    the same request (it was silently answered with the first run)."""

    def __init__(self, key: str, run_id: str) -> None:
        super().__init__(
            f"idempotency key {key!r} was used with other args (run {run_id!r}); "
            "use a new key for a new request"
        )
        self.key = key
        self.run_id = run_id


class IdTaken(ConflictError):
    """Raised when a job or DAG is registered under an id that already exists."""

    def __init__(self, any_id: str) -> None:
        super().__init__(f"id {any_id!r} is taken")
        self.id = any_id


class Superseded(ConflictError):
    """Raised when a deploy of an app (``shardsched deploy``) is overtaken by a later one:
    the later deploy claimed a newer generation, and this one writes nothing more (what it
    wrote before stands until the later one makes it match its own definitions)."""

    def __init__(self, app: str, generation: int, newer: int) -> None:
        super().__init__(
            f"this deploy of app {app!r} (generation {generation}) was superseded by a later"
            f" one (generation {newer}): its definitions are the app's now"
        )
        self.app = app
        self.generation = generation
        self.newer = newer


class NotOwned(ConflictError):
    """Raised when a deploy of an app declares a job or DAG id that exists outside the
    app's own set (registered by hand, by ``apply``, or by another app): a deploy changes
    only what is its own."""

    def __init__(self, app: str, any_id: str, owner: str) -> None:
        held = f"apply set {owner!r}" if owner else "no app (it was registered another way)"
        super().__init__(
            f"{any_id!r} exists and belongs to {held}: app {app!r} changes only its own;"
            " give the declaration another id, or delete that one first"
        )
        self.app = app
        self.id = any_id
        self.owner = owner


class NameTaken(ConflictError):
    """Raised when a job is created with a unique name (``unique_name``) that another job
    has (``job_ids``; empty: one is being created with it at this moment)."""

    def __init__(self, name: str, job_ids: list[str]) -> None:
        held = (
            f"job {', '.join(job_ids)} is named {name!r}"
            if job_ids
            else f"a job named {name!r} is being created right now"
        )
        super().__init__(
            f"{held}: choose another name, or ask for a second job of that name"
            " (unique_name=false; shardsched jobs create --allow-duplicate-name)"
        )
        self.name = name
        self.job_ids = job_ids


class PreconditionFailed(ConflictError):
    """Raised when a change names the version it expects (``If-Match``) and the job or
    DAG is at another one (``current``; None when it does not exist): nothing changed."""

    def __init__(self, any_id: str, expected: int, current: int | None) -> None:
        now = "does not exist" if current is None else f"is at version {current}"
        super().__init__(f"{any_id!r} {now}, not {expected}: read it again and retry")
        self.id = any_id
        self.expected = expected
        self.current = current


class JobDeleted(ConflictError):
    """Raised when changing or triggering a job that was deleted."""

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"job {job_id!r} is deleted; restore it (POST /api/v1/jobs/{{id}}/restore), or"
            " create it again under its id: either starts its new incarnation"
        )
        self.job_id = job_id


#: Error replies that mean "not now", not "never": the server is full (OOM), starting
#: (LOADING), running a long script (BUSY), a replica or failing over (READONLY,
#: MASTERDOWN, CLUSTERDOWN, TRYAGAIN, NOREPLICAS, UNBLOCKED), unable to persist (MISCONF),
#: or refusing this user (NOPERM, NOAUTH, WRONGPASS: an operator's fix, and no reason for a
#: process to die either). Callers back off and retry; the HTTP API answers 503.
TRANSIENT_REPLIES = (
    "OOM",
    "LOADING",
    "BUSY",
    "READONLY",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "NOREPLICAS",
    "UNBLOCKED",
    "MISCONF",
    "NOPERM",
    "NOAUTH",
    "WRONGPASS",
)


def is_transient_reply(message: str) -> bool:
    """Whether an error reply's text is one of :data:`TRANSIENT_REPLIES`."""
    return message.split(" ", 1)[0] in TRANSIENT_REPLIES


def error_kind(exc: BaseException) -> str:
    """A short label for a Redis failure, for metrics: the reply's code, or ``connection``."""
    text = str(exc)
    code = text.split(" ", 1)[0]
    if code.isupper() and code.isalpha():
        return code if code in TRANSIENT_REPLIES else "ERR"
    return "connection"


class RedisUnavailable(ShardschedError):
    """Raised when Redis refuses a call for a reason that passes (one of
    :data:`TRANSIENT_REPLIES`): nothing was changed; retry after a pause."""


class BulkPartiallyApplied(ShardschedError):
    """Raised by a bulk registration that failed after some of its batches were committed
    (Redis went away mid-way): ``created`` lists the jobs that exist, in order, and
    ``error`` is what stopped the rest. Every spec was validated before the first write,
    so this is never a validation error."""

    def __init__(self, created: Sequence[object], error: BaseException) -> None:
        super().__init__(f"{len(created)} jobs registered before: {error}")
        self.created = created
        self.error = error


class ConfigError(ShardschedError):
    """Raised when the deployment is misconfigured (shard count, Redis settings)."""


class DagNotFound(NotFoundError):
    """Raised when no DAG has the given id."""

    def __init__(self, dag_id: str) -> None:
        super().__init__(f"DAG {dag_id!r} not found")
        self.dag_id = dag_id


class DagRunNotFound(NotFoundError):
    """Raised when no DAG run has the given id."""

    def __init__(self, dag_run_id: str) -> None:
        super().__init__(f"DAG run {dag_run_id!r} not found")
        self.dag_run_id = dag_run_id


class DagDeleted(ConflictError):
    """Raised when changing or triggering a DAG that was deleted."""

    def __init__(self, dag_id: str) -> None:
        super().__init__(f"DAG {dag_id!r} is deleted")
        self.dag_id = dag_id


class DagTaskJob(ConflictError):
    """Raised when a DAG task's job is changed, deleted or triggered on its own: it is
    managed through its DAG."""

    def __init__(self, job_id: str, dag_id: str) -> None:
        super().__init__(f"job {job_id!r} is a task of DAG {dag_id!r}: change it through the DAG")
        self.job_id = job_id
        self.dag_id = dag_id


class Forbidden(ShardschedError):
    """Raised when the caller's token does not cover what it asked for."""


class Unauthenticated(ShardschedError):
    """Raised when the API was sent no token, or one it does not know (HTTP 401)."""


class Unreachable(ShardschedError, ConnectionError):
    """Raised when the service (the API, or Redis for the Redis SDK) cannot be reached,
    after the retries the call allows; whether a write that was under way took effect is
    unknown: read before writing again, or repeat it with its idempotency key."""


class HttpError(ShardschedError):
    """An error answer of the HTTP API with no exception of its own here (400, 413, 415,
    429, 500...), as the HTTP SDK raises it: its status, code, message and details."""

    def __init__(self, status: int, code: str, message: str, details: object = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status, self.code, self.message, self.details = status, code, message, details
