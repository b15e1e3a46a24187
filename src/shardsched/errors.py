"""The exceptions shardsched raises; one root so callers can catch everything of ours."""

from __future__ import annotations

import msgspec


class ShardschedError(Exception):
    """Root of every error raised by shardsched."""


class ValidationError(ShardschedError, msgspec.ValidationError):
    """Raised when a job, schedule or request body is invalid; ``field`` is its $.path.

    A msgspec.ValidationError (so a ValueError) too: one ``except`` catches both kinds."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
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


class ConflictError(ShardschedError):
    """Raised when the request conflicts with the current state (a deleted job, a race)."""


class JobDeleted(ConflictError):
    """Raised when changing or triggering a job that was deleted."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} is deleted")
        self.job_id = job_id


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
