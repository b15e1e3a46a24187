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

from shardsched import ops
from shardsched.core.errors import BulkPartiallyApplied, ValidationError
from shardsched.core.instants import to_ms
from shardsched.core.models import (
    BackfillRequest,
    DagSpec,
    JobPatch,
    JobSpec,
    JobStatus,
    RunState,
    Schedule,
    SchedulePreviewRequest,
)
from shardsched.core.views import (
    BackfillResult,
    Dag,
    DagCreated,
    DagList,
    DagRun,
    DagRunList,
    DagTriggered,
    Job,
    JobCreated,
    JobList,
    JobVersions,
    Run,
    RunList,
    RunOutput,
    SchedulePreview,
    Triggered,
)
from shardsched.ops import dags as dag_ops
from shardsched.ops import listing
from shardsched.ops.pagination import parse_cursor
from shardsched.ops.preview import preview_schedule
from shardsched.store.keys import DEFAULT_NAMESPACE
from shardsched.store.scripts import SCRIPTS

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


#: Replies after which a call is sent again (scripts reloaded, the slot map re-read).
_REDIRECTED = (
    redis_py.exceptions.NoScriptError,
    redis_py.exceptions.AskError,  # MovedError is one too
    redis_py.exceptions.TryAgainError,
    redis_py.exceptions.ClusterDownError,
)


class Client(_Api):
    """A synchronous handle on one shardsched deployment (redis-py + hiredis).

    ``redis_url`` is ``redis://…`` for one server, or ``redis+cluster://host:port[,…]``
    for a Redis Cluster (redis-py's RedisCluster finds the nodes and owns the slot map;
    each batch goes to every node its slots live on, one pipeline per node)."""

    def __init__(self, redis_url: str, namespace: str = DEFAULT_NAMESPACE) -> None:
        self._cluster: redis_py.RedisCluster | None = None
        if redis_url.startswith("redis+cluster://"):
            from shardsched.store.redis.cluster import parse_cluster_url

            seeds = parse_cluster_url(redis_url)
            self._cluster = redis_py.RedisCluster(
                startup_nodes=[redis_py.cluster.ClusterNode(u.host, u.port) for u in seeds],
                username=seeds[0].username,
                password=seeds[0].password,
                protocol=2,
            )
            self._redis = None
        else:
            self._redis = redis_py.Redis.from_url(redis_url, protocol=2)
            # Raw RESP replies, as the trio client sees them: the operations are shared.
            self._redis.response_callbacks.clear()
        self._load_scripts()
        self.deployment = self._run(ops.open_deployment(namespace, None))

    def _node_clients(self) -> list[redis_py.Redis]:
        """The one server, or every cluster master, as raw-reply clients."""
        if self._cluster is None:
            assert self._redis is not None
            return [self._redis]
        clients = []
        for node in self._cluster.get_primaries():
            client = node.redis_connection
            client.response_callbacks.clear()
            clients.append(client)
        return clients

    def _load_scripts(self) -> None:
        for client in self._node_clients():
            pipe = client.pipeline(transaction=False)
            for script in SCRIPTS.values():
                pipe.execute_command("SCRIPT", "LOAD", script.source)
            pipe.execute()

    def _client_for(self, call: ops.Call) -> redis_py.Redis:
        if self._cluster is None:
            assert self._redis is not None
            return self._redis
        from shardsched.store.redis.cluster import command_slot

        args = ("EVALSHA", "", len(call.keys), *call.keys) if call.script else call.args
        slot = command_slot(args)
        if slot is None:
            node = self._cluster.get_random_primary_node()
        else:
            node = self._cluster.nodes_manager.get_node_from_slot(slot)
        client = node.redis_connection
        if client is None:
            self._cluster.nodes_manager.initialize()
            return self._client_for(call)
        client.response_callbacks.clear()
        return client

    def _execute(self, calls: Sequence[ops.Call], attempt: int = 0) -> list[Any]:
        groups: dict[int, tuple[redis_py.Redis, list[int]]] = {}
        for i, call in enumerate(calls):
            client = self._client_for(call)
            groups.setdefault(id(client), (client, []))[1].append(i)
        replies: list[Any] = [None] * len(calls)
        for client, idx in groups.values():
            pipe = client.pipeline(transaction=False)
            for i in idx:
                call = calls[i]
                if call.script is None:
                    pipe.execute_command(*call.args)
                else:
                    sha = SCRIPTS[call.script].sha
                    pipe.execute_command("EVALSHA", sha, len(call.keys), *call.keys, *call.args)
            for i, reply in zip(idx, pipe.execute(raise_on_error=False), strict=True):
                replies[i] = reply
        redo = [
            i
            for i, r in enumerate(replies)
            if isinstance(r, redis_py.exceptions.NoScriptError)
            or (
                isinstance(r, redis_py.exceptions.ResponseError)
                and str(r).startswith(("MOVED", "ASK"))
            )
        ]
        if redo and attempt < 5:
            # a restarted or new node without our scripts, or slots that moved: look again
            if self._cluster is not None:
                self._cluster.nodes_manager.initialize()
            self._load_scripts()
            for i, reply in zip(
                redo, self._execute([calls[i] for i in redo], attempt + 1), strict=True
            ):
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
        """Register many jobs, one pipelined round trip per ``batch``.

        Every spec is validated before anything is written (a bad one raises
        ValidationError naming ``$[i].field``, and nothing is registered). Raises
        BulkPartiallyApplied, listing the jobs that were registered, if Redis fails after
        the first batch."""
        chunk = list(specs)
        try:
            ops.validate_specs(chunk)
        except msgspec.ValidationError as exc:
            raise _as_validation_error(exc) from None
        out: list[JobCreated] = []
        for i in range(0, len(chunk), batch):
            try:
                out += self._run(ops.create_jobs(self.deployment, chunk[i : i + batch], True))
            except Exception as exc:
                if not out:
                    raise
                raise BulkPartiallyApplied(out, exc) from exc
        return out

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
        elif self._redis is not None:
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
        from shardsched.store.redis import connect

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
        """As :meth:`Client.add_jobs`."""
        chunk = list(specs)
        try:
            ops.validate_specs(chunk)
        except msgspec.ValidationError as exc:
            raise _as_validation_error(exc) from None
        out: list[JobCreated] = []
        for i in range(0, len(chunk), batch):
            try:
                out += await self._run(ops.create_jobs(self.deployment, chunk[i : i + batch], True))
            except Exception as exc:
                if not out:
                    raise
                raise BulkPartiallyApplied(out, exc) from exc
        return out

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
