"""The Python SDK: ``shardsched.Client`` (synchronous, redis-py + hiredis) and
``shardsched.AsyncClient`` (trio, on the service's own connection).

No HTTP hop: both drive the same operations (:mod:`shardsched.ops` and friends) and so the
very same Lua scripts as the router. Every operation is written once, in :class:`_Api`;
the two clients differ only in how they run it. Bulk registration pipelines every script
call of a batch in one round trip.

Errors: JobNotFound / RunNotFound / DagNotFound / DagRunNotFound (LookupError), JobDeleted
/ DagDeleted / DagTaskJob / ConflictError, and ValidationError (with ``field``, the
$.path) for invalid input — as the HTTP API answers 404 / 409 / 422.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec
import redis as redis_py

from shardsched import dag_ops, listing, ops
from shardsched.errors import ValidationError
from shardsched.keys import DEFAULT_NAMESPACE
from shardsched.models import (
    BackfillRequest,
    BackfillResult,
    Dag,
    DagCreated,
    DagList,
    DagRun,
    DagRunList,
    DagSpec,
    DagTriggered,
    Job,
    JobCreated,
    JobList,
    JobPatch,
    JobSpec,
    JobStatus,
    JobVersions,
    Run,
    RunList,
    RunOutput,
    RunState,
    Schedule,
    SchedulePreview,
    SchedulePreviewRequest,
    Triggered,
)
from shardsched.pagination import parse_cursor
from shardsched.preview import preview_schedule
from shardsched.scripts import SCRIPTS
from shardsched.shard.cron import to_ms

_AT_PATH = re.compile(r" - at `(\$[^`]*)`$")
_NAMED_FIELD = re.compile(r"Object (?:missing required|contains unknown) field `([^`]+)`")


def _as_validation_error(exc: msgspec.ValidationError) -> ValidationError:
    """msgspec's error as ours, the field split out as the HTTP API reports it."""
    if isinstance(exc, ValidationError):
        return exc
    message, field = str(exc), "$"
    if m := _AT_PATH.search(message):
        field, message = m.group(1), message[: m.start()]
    if m := _NAMED_FIELD.match(message):
        field = f"{field}.{m.group(1)}"
    return ValidationError(message, field)


def _ms(when: datetime | None) -> int | None:
    return None if when is None else to_ms(when)


class _Api:
    """Every operation, once. ``_run`` runs one (blocking, or as an awaitable)."""

    deployment: ops.Deployment

    def _run(self, op: ops.Op) -> Any:
        raise NotImplementedError

    # jobs --------------------------------------------------------------------------------

    def add_job(self, spec: JobSpec) -> JobCreated:
        return self._run(ops.create_job(self.deployment, spec))

    def get_job(self, job_id: str) -> Job:
        return self._run(ops.get_job(self.deployment, job_id))

    def list_jobs(
        self,
        limit: int = 50,
        cursor: str | None = None,
        status: JobStatus | None = None,
        name_prefix: str | None = None,
    ) -> JobList:
        """A page of jobs, newest first; pass ``next_cursor`` back for the next page."""
        op = listing.jobs_page(self.deployment, limit, parse_cursor(cursor), status, name_prefix)
        return self._run(op)

    def update_job(self, job_id: str, patch: JobPatch) -> Job:
        return self._run(ops.patch_job(self.deployment, job_id, patch))

    def pause(self, job_id: str, reason: str | None = None, until: datetime | None = None) -> Job:
        """Pause; with ``until`` the job resumes by itself then."""
        patch = JobPatch(status=JobStatus.PAUSED, pause_reason=reason, paused_until=until)
        return self.update_job(job_id, patch)

    def resume(self, job_id: str) -> Job:
        return self.update_job(job_id, JobPatch(status=JobStatus.ACTIVE))

    def delete_job(self, job_id: str) -> Job:
        return self._run(ops.delete_job(self.deployment, job_id))

    def trigger(self, job_id: str) -> Triggered:
        return self._run(ops.trigger(self.deployment, job_id))

    def job_versions(self, job_id: str) -> JobVersions:
        return self._run(ops.job_versions(self.deployment, job_id))

    def backfill(
        self, job_id: str, start: datetime, end: datetime, max_concurrent: int = 1
    ) -> BackfillResult:
        """Run every nominal tick of [start, end] that has no run yet."""
        request = BackfillRequest(start=start, end=end, max_concurrent=max_concurrent)
        return self._run(ops.backfill(self.deployment, job_id, request))

    def next_fire_times(
        self, schedule: Schedule, count: int = 10, after: datetime | None = None
    ) -> SchedulePreview:
        """The schedule's next fire times (UTC and its wall clock), DST moves flagged."""
        request = SchedulePreviewRequest(schedule=schedule, count=count, after=after)
        return self._run(preview_schedule(request))

    # runs --------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> Run:
        return self._run(ops.get_run(self.deployment, run_id))

    def list_runs(
        self,
        job_id: str,
        limit: int = 50,
        cursor: str | None = None,
        state: RunState | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> RunList:
        """A page of a job's runs, newest first by scheduled_for."""
        op = listing.runs_page(
            self.deployment, job_id, limit, parse_cursor(cursor), state, _ms(since), _ms(until)
        )
        return self._run(op)

    def get_output(self, run_id: str) -> RunOutput:
        return self._run(ops.get_output(self.deployment, run_id))

    def list_dead_letter(self, limit: int = 100, cursor: str | None = None) -> RunList:
        return self._run(listing.dead_letter_page(self.deployment, limit, parse_cursor(cursor)))

    def retry_run(self, run_id: str) -> Run:
        """Send a dead-lettered run back as a new attempt."""
        return self._run(ops.retry_run(self.deployment, run_id))

    # DAGs --------------------------------------------------------------------------------

    def add_dag(self, spec: DagSpec) -> DagCreated:
        """Register a DAG; a bad one (unknown dependency, duplicate task, the cycle named)
        raises ValidationError and writes nothing."""
        return self._run(dag_ops.create_dag(self.deployment, spec))

    def get_dag(self, dag_id: str) -> Dag:
        return self._run(dag_ops.get_dag(self.deployment, dag_id))

    def list_dags(
        self,
        limit: int = 100,
        cursor: str | None = None,
        status: JobStatus | None = None,
        name_prefix: str | None = None,
    ) -> DagList:
        op = listing.dags_page(self.deployment, limit, parse_cursor(cursor), status, name_prefix)
        return self._run(op)

    def pause_dag(self, dag_id: str) -> Dag:
        return self._run(dag_ops.set_dag_status(self.deployment, dag_id, JobStatus.PAUSED))

    def resume_dag(self, dag_id: str) -> Dag:
        return self._run(dag_ops.set_dag_status(self.deployment, dag_id, JobStatus.ACTIVE))

    def delete_dag(self, dag_id: str) -> Dag:
        return self._run(dag_ops.delete_dag(self.deployment, dag_id))

    def trigger_dag(self, dag_id: str) -> DagTriggered:
        return self._run(dag_ops.trigger_dag(self.deployment, dag_id))

    def list_dag_runs(self, dag_id: str, limit: int = 50, cursor: str | None = None) -> DagRunList:
        return self._run(
            listing.dag_runs_page(self.deployment, dag_id, limit, parse_cursor(cursor))
        )

    def get_dag_run(self, dag_run_id: str) -> DagRun:
        return self._run(dag_ops.get_dag_run(self.deployment, dag_run_id))


class Client(_Api):
    """A synchronous handle on one shardsched deployment (redis-py + hiredis)."""

    def __init__(self, redis_url: str, namespace: str = DEFAULT_NAMESPACE) -> None:
        self._redis = redis_py.Redis.from_url(redis_url, protocol=2)
        # Raw RESP replies, exactly as the trio client sees them: the operations are shared.
        self._redis.response_callbacks.clear()
        self._load_scripts()
        self.deployment = self._run(ops.open_deployment(namespace, None))

    def _load_scripts(self) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for script in SCRIPTS.values():
            pipe.script_load(script.source)
        pipe.execute()

    def _execute(self, calls: Sequence[ops.Call]) -> list[Any]:
        pipe = self._redis.pipeline(transaction=False)
        for call in calls:
            if call.script is None:
                pipe.execute_command(*call.args)
            else:
                pipe.execute_command(
                    "EVALSHA", SCRIPTS[call.script].sha, len(call.keys), *call.keys, *call.args
                )
        replies = pipe.execute(raise_on_error=False)
        if any(isinstance(r, redis_py.exceptions.NoScriptError) for r in replies):
            self._load_scripts()  # Redis restarted or SCRIPT FLUSH: reload, redo the missing
            redo = [
                i for i, r in enumerate(replies) if isinstance(r, redis_py.exceptions.NoScriptError)
            ]
            for i, reply in zip(redo, self._execute([calls[i] for i in redo]), strict=True):
                replies[i] = reply
        return replies

    def _run(self, op: ops.Op) -> Any:
        try:
            calls = next(op)
            while True:
                calls = op.send(self._execute(calls))
        except StopIteration as stop:
            return stop.value
        except msgspec.ValidationError as exc:
            raise _as_validation_error(exc) from None

    def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        """Register many jobs, one pipelined round trip per ``batch``."""
        out: list[JobCreated] = []
        chunk: list[JobSpec] = []
        for spec in specs:
            chunk.append(spec)
            if len(chunk) >= batch:
                out += self._run(ops.create_jobs(self.deployment, chunk))
                chunk = []
        if chunk:
            out += self._run(ops.create_jobs(self.deployment, chunk))
        return out

    def close(self) -> None:
        self._redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Api):
    """The same operations for trio programs, on shardsched's own trio connection pool:
    every method returns an awaitable of what :class:`Client`'s returns.

        async with await AsyncClient.open("redis://127.0.0.1:6379/0") as client:
            job = await client.get_job(job_id)
    """

    def __init__(self, redis: Any, deployment: ops.Deployment) -> None:
        self._redis = redis
        self.deployment = deployment

    @classmethod
    async def open(cls, redis_url: str, namespace: str = DEFAULT_NAMESPACE) -> AsyncClient:
        from shardsched.redis import connect

        redis = connect(redis_url, size=4)
        try:
            deployment = await ops.drive_async(ops.open_deployment(namespace, None), redis)
        except BaseException:
            await redis.aclose()
            raise
        return cls(redis, deployment)

    def _run(self, op: ops.Op) -> Any:
        async def run() -> Any:
            try:
                return await ops.drive_async(op, self._redis)
            except msgspec.ValidationError as exc:
                raise _as_validation_error(exc) from None

        return run()

    async def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        out: list[JobCreated] = []
        chunk = list(specs)
        for i in range(0, len(chunk), batch):
            out += await self._run(ops.create_jobs(self.deployment, chunk[i : i + batch]))
        return out

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
