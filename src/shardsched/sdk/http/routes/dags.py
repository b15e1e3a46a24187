"""Routes of DAGs: register, read, list, pause, resume, delete, restore, trigger, runs."""

from __future__ import annotations

from typing import Any

from shardsched.core.errors import DagRunNotFound
from shardsched.core.models import DagSpec, JobStatus
from shardsched.core.validation import check_dag_id
from shardsched.core.views import (
    ChangeList,
    Dag,
    DagCreated,
    DagList,
    DagRun,
    DagRunList,
    DagTriggered,
)
from shardsched.ops.jobs import declare
from shardsched.sdk.http.calls import HttpCall, query, segment
from shardsched.sdk.http.routes.jobs import V1, dag_path, if_match_header, put_read


def add_dag(spec: DagSpec) -> HttpCall[DagCreated]:
    return HttpCall("POST", f"{V1}/dags", DagCreated, body=spec)


def put_dag(
    dag_id: str, spec: DagSpec, if_match: int | None = None
) -> HttpCall[tuple[Dag, declare.Outcome]]:
    check_dag_id(dag_id)  # as the service checks it: ValidationError at $.id
    headers = if_match_header(if_match)
    return HttpCall("PUT", dag_path(dag_id), Dag, {}, spec, put_read, headers=headers)


def get_dag(dag_id: str) -> HttpCall[Dag]:
    return HttpCall("GET", dag_path(dag_id), Dag)


def list_dags(
    limit: int = 50,
    cursor: str | None = None,
    status: JobStatus | None = None,
    name_prefix: str | None = None,
    include_deleted: bool = False,
    labels: dict[str, str] | None = None,
) -> HttpCall[DagList]:
    q = query(
        limit=limit,
        cursor=cursor,
        status=status,
        name_prefix=name_prefix,
        include_deleted=include_deleted or None,
        label=labels,
    )
    return HttpCall("GET", f"{V1}/dags", DagList, q)


def pause_dag(dag_id: str) -> HttpCall[Dag]:
    return HttpCall("PATCH", dag_path(dag_id), Dag, body={"status": "paused"}, idempotent=True)


def resume_dag(dag_id: str) -> HttpCall[Dag]:
    return HttpCall("PATCH", dag_path(dag_id), Dag, body={"status": "active"}, idempotent=True)


def delete_dag(dag_id: str) -> HttpCall[Dag]:
    return HttpCall("DELETE", dag_path(dag_id), Dag)


def restore_dag(dag_id: str) -> HttpCall[Dag]:
    return HttpCall("POST", dag_path(dag_id, "/restore"), Dag)


def trigger_dag(dag_id: str, args: dict[str, Any] | None = None) -> HttpCall[DagTriggered]:
    body = {} if args is None else {"args": args}
    return HttpCall("POST", dag_path(dag_id, "/trigger"), DagTriggered, body=body)


def list_dag_runs(dag_id: str, limit: int = 50, cursor: str | None = None) -> HttpCall[DagRunList]:
    q = query(limit=limit, cursor=cursor)
    return HttpCall("GET", dag_path(dag_id, "/runs"), DagRunList, q)


def get_dag_run(dag_run_id: str) -> HttpCall[DagRun]:
    return HttpCall("GET", f"{V1}/dag-runs/{segment(dag_run_id, DagRunNotFound)}", DagRun)


def dag_changes(dag_id: str, limit: int = 50, cursor: str | None = None) -> HttpCall[ChangeList]:
    q = query(limit=limit, cursor=cursor)
    return HttpCall("GET", dag_path(dag_id, "/changes"), ChangeList, q)
