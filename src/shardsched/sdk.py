"""``shardsched.Client``: the synchronous Python SDK, on redis-py.

No HTTP hop: it drives the same operations (:mod:`shardsched.ops`) and so the very same
Lua scripts as the router. Bulk registration pipelines every script call in one round
trip per batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import redis as redis_py

from shardsched import dag_ops, listing, ops
from shardsched.keys import DEFAULT_NAMESPACE
from shardsched.models import (
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


class Client:
    """A handle on one shardsched deployment.

    Raises JobNotFound / RunNotFound / DagNotFound / DagRunNotFound (LookupError),
    JobDeleted / DagDeleted / DagTaskJob (ConflictError), and msgspec.ValidationError or
    shardsched.ValidationError for invalid input, as the HTTP API answers 404 / 409 / 422.
    """

    def __init__(self, redis_url: str, namespace: str = DEFAULT_NAMESPACE) -> None:
        self._redis = redis_py.Redis.from_url(redis_url, protocol=2)
        # Raw RESP replies, exactly as the trio client sees them: the operations are shared.
        self._redis.response_callbacks.clear()
        self._load_scripts()
        self.deployment: ops.Deployment = self._drive(ops.open_deployment(namespace, None))

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

    def _drive(self, op: ops.Op) -> Any:
        try:
            calls = next(op)
            while True:
                calls = op.send(self._execute(calls))
        except StopIteration as stop:
            return stop.value

    def add_job(self, spec: JobSpec) -> JobCreated:
        return self._drive(ops.create_job(self.deployment, spec))

    def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        """Register many jobs, one pipelined round trip per ``batch``."""
        out: list[JobCreated] = []
        chunk: list[JobSpec] = []
        for spec in specs:
            chunk.append(spec)
            if len(chunk) >= batch:
                out += self._drive(ops.create_jobs(self.deployment, chunk))
                chunk = []
        if chunk:
            out += self._drive(ops.create_jobs(self.deployment, chunk))
        return out

    def get_job(self, job_id: str) -> Job:
        return self._drive(ops.get_job(self.deployment, job_id))

    def update_job(self, job_id: str, patch: JobPatch) -> Job:
        return self._drive(ops.patch_job(self.deployment, job_id, patch))

    def pause(self, job_id: str) -> Job:
        return self.update_job(job_id, JobPatch(status=JobStatus.PAUSED))

    def resume(self, job_id: str) -> Job:
        return self.update_job(job_id, JobPatch(status=JobStatus.ACTIVE))

    def delete_job(self, job_id: str) -> Job:
        return self._drive(ops.delete_job(self.deployment, job_id))

    def trigger(self, job_id: str) -> Triggered:
        return self._drive(ops.trigger(self.deployment, job_id))

    def get_run(self, run_id: str) -> Run:
        return self._drive(ops.get_run(self.deployment, run_id))

    def list_jobs(
        self,
        limit: int = 50,
        cursor: str | None = None,
        status: JobStatus | None = None,
        name_prefix: str | None = None,
    ) -> JobList:
        """A page of jobs, newest first; pass ``next_cursor`` back for the next page."""
        op = listing.jobs_page(self.deployment, limit, parse_cursor(cursor), status, name_prefix)
        return self._drive(op)

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
            self.deployment,
            job_id,
            limit,
            parse_cursor(cursor),
            state,
            None if since is None else to_ms(since),
            None if until is None else to_ms(until),
        )
        return self._drive(op)

    def get_output(self, run_id: str) -> RunOutput:
        return self._drive(ops.get_output(self.deployment, run_id))

    def next_fire_times(
        self, schedule: Schedule, count: int = 10, after: datetime | None = None
    ) -> SchedulePreview:
        """The schedule's next fire times (UTC and its wall clock), DST moves flagged."""
        request = SchedulePreviewRequest(schedule=schedule, count=count, after=after)
        return self._drive(preview_schedule(request))

    def add_dag(self, spec: DagSpec) -> DagCreated:
        """Register a DAG; raises msgspec.ValidationError naming the field (unknown
        dependency, duplicate task, the cycle itself) and writes nothing then."""
        return self._drive(dag_ops.create_dag(self.deployment, spec))

    def get_dag(self, dag_id: str) -> Dag:
        return self._drive(dag_ops.get_dag(self.deployment, dag_id))

    def list_dags(
        self,
        limit: int = 100,
        cursor: str | None = None,
        status: JobStatus | None = None,
        name_prefix: str | None = None,
    ) -> DagList:
        op = listing.dags_page(self.deployment, limit, parse_cursor(cursor), status, name_prefix)
        return self._drive(op)

    def pause_dag(self, dag_id: str) -> Dag:
        return self._drive(dag_ops.set_dag_status(self.deployment, dag_id, JobStatus.PAUSED))

    def resume_dag(self, dag_id: str) -> Dag:
        return self._drive(dag_ops.set_dag_status(self.deployment, dag_id, JobStatus.ACTIVE))

    def delete_dag(self, dag_id: str) -> Dag:
        return self._drive(dag_ops.delete_dag(self.deployment, dag_id))

    def trigger_dag(self, dag_id: str) -> DagTriggered:
        return self._drive(dag_ops.trigger_dag(self.deployment, dag_id))

    def list_dag_runs(self, dag_id: str, limit: int = 50, cursor: str | None = None) -> DagRunList:
        return self._drive(
            listing.dag_runs_page(self.deployment, dag_id, limit, parse_cursor(cursor))
        )

    def get_dag_run(self, dag_run_id: str) -> DagRun:
        return self._drive(dag_ops.get_dag_run(self.deployment, dag_run_id))

    def close(self) -> None:
        self._redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
