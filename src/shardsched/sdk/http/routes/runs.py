"""Routes of runs and DAG runs: read, list, retry, cancel, repair."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Literal

from shardsched.core.dag_repair import RepairPlan
from shardsched.core.errors import DagRunNotFound, RunNotFound
from shardsched.core.models import RunState
from shardsched.core.views import BulkRetry, DagRun, Run, RunList, RunOutput
from shardsched.ops.listing import FAILURE_STATES
from shardsched.sdk.http.calls import HttpCall, query, segment
from shardsched.sdk.http.routes.jobs import V1, job_path


def get_run(run_id: str) -> HttpCall[Run]:
    return HttpCall("GET", f"{V1}/runs/{segment(run_id, RunNotFound)}", Run)


def list_runs(
    job_id: str,
    limit: int = 50,
    cursor: str | None = None,
    state: RunState | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> HttpCall[RunList]:
    q = query(limit=limit, cursor=cursor, state=state, since=since, until=until)
    return HttpCall("GET", job_path(job_id, "/runs"), RunList, q)


def get_output(run_id: str) -> HttpCall[RunOutput]:
    return HttpCall("GET", f"{V1}/runs/{segment(run_id, RunNotFound)}/output", RunOutput)


def list_dead_letter(limit: int = 50, cursor: str | None = None) -> HttpCall[RunList]:
    return HttpCall("GET", f"{V1}/dead-letter", RunList, query(limit=limit, cursor=cursor))


def list_failures(
    limit: int = 50,
    cursor: str | None = None,
    states: Iterable[RunState] = FAILURE_STATES,
    since: datetime | None = None,
    until: datetime | None = None,
    name_prefix: str | None = None,
) -> HttpCall[RunList]:
    state = ",".join(sorted(str(getattr(s, "value", s)) for s in states))
    q = query(
        limit=limit, cursor=cursor, state=state, since=since, until=until, name_prefix=name_prefix
    )
    return HttpCall("GET", f"{V1}/runs", RunList, q)


def retry_run(run_id: str) -> HttpCall[Run]:
    # a second retry of one dead-lettered run is refused (AlreadyRetried): safe to resend
    return HttpCall("POST", f"{V1}/runs/{segment(run_id, RunNotFound)}/retry", Run, idempotent=True)


def cancel_run(run_id: str, reason: str = "") -> HttpCall[Run]:
    path = f"{V1}/runs/{segment(run_id, RunNotFound)}/cancel"
    return HttpCall("POST", path, Run, body={"reason": reason}, idempotent=True)  # ends as one


def retry_runs(run_ids: Sequence[str], dry_run: bool = False) -> HttpCall[BulkRetry]:
    body = {"run_ids": list(run_ids), "dry_run": dry_run}
    return HttpCall("POST", f"{V1}/dead-letter/retry", BulkRetry, body=body, idempotent=True)


def cancel_dag_run(dag_run_id: str, reason: str = "") -> HttpCall[DagRun]:
    path = f"{V1}/dag-runs/{segment(dag_run_id, DagRunNotFound)}/cancel"
    return HttpCall("POST", path, DagRun, body={"reason": reason}, idempotent=True)


def clear_task(
    dag_run_id: str,
    task: str,
    downstream: bool = True,
    upstream: bool = False,
    only_failed: bool = False,
    dry_run: bool = False,
    token: str | None = None,
    note: str = "",
) -> HttpCall[RepairPlan]:
    body = {
        "task": task,
        "downstream": downstream,
        "upstream": upstream,
        "only_failed": only_failed,
        "dry_run": dry_run,
        "token": token,
        "note": note,
    }
    path = f"{V1}/dag-runs/{segment(dag_run_id, DagRunNotFound)}/clear"
    # a plan's token applies once (the DAG run moved on: ConflictError), so with one, or
    # as a dry run, a resend is safe
    safe = dry_run or token is not None
    return HttpCall("POST", path, RepairPlan, body=body, idempotent=safe)


def mark_task(
    dag_run_id: str,
    task: str,
    state: Literal["succeeded", "failed"],
    note: str = "",
    dry_run: bool = False,
    token: str | None = None,
) -> HttpCall[RepairPlan]:
    body = {"task": task, "state": state, "note": note, "dry_run": dry_run, "token": token}
    path = f"{V1}/dag-runs/{segment(dag_run_id, DagRunNotFound)}/mark"
    return HttpCall("POST", path, RepairPlan, body=body, idempotent=dry_run or token is not None)


def list_runs_under_way(
    state: str = "running",
    limit: int = 50,
    cursor: str | None = None,
    job_id: str | None = None,
    queue: str | None = None,
    worker: str | None = None,
    labels: dict[str, str] | None = None,
) -> HttpCall[RunList]:
    q = query(
        state=state,
        limit=limit,
        cursor=cursor,
        job=job_id,
        queue=queue,
        worker=worker,
        label=labels,
    )
    return HttpCall("GET", f"{V1}/runs", RunList, q)
