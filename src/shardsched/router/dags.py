"""DAGs: register, read, list, replace, pause, delete, restore and trigger a DAG, its runs
and change log, one DAG run, cancelling it and repairing it (clear, mark)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core import views as v
from shardsched.core.dag_repair import ClearRequest, MarkRequest, RepairPlan
from shardsched.core.errors import DagNotFound, DagRunNotFound
from shardsched.core.ids import dag_id_of, dag_run_id_of
from shardsched.core.models import DagSpec, JobStatus
from shardsched.core.params import CancelRequest, TriggerRequest
from shardsched.core.patches import DagPatch
from shardsched.core.views import Dag
from shardsched.ops import listing
from shardsched.ops.access import teams
from shardsched.ops.dags import dag_runs, repair
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.history import changes
from shardsched.ops.jobs import declare
from shardsched.ops.runs import control
from shardsched.router import http
from shardsched.router.context import Context, put_answer
from shardsched.router.guards import who
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import ChangeQuery, DagQuery, DagRunQuery, opt

_dag_decoder = msgspec.json.Decoder(DagSpec)
_dag_patch_decoder = msgspec.json.Decoder(DagPatch)
_trigger_decoder = msgspec.json.Decoder(TriggerRequest)


def _task_keys(spec: DagSpec) -> list[tuple[str | None, str]]:
    return [(t.concurrency_key, f"$.tasks[{i}].concurrency_key") for i, t in enumerate(spec.tasks)]


_cancel_decoder = msgspec.json.Decoder(CancelRequest)
_clear_decoder = msgspec.json.Decoder(ClearRequest)
_mark_decoder = msgspec.json.Decoder(MarkRequest)


async def create_dag(cx: Context, request: Request) -> Response:
    spec = await http.decode(request, _dag_decoder)
    teams.require_name(who(request), spec.name)
    teams.require_keys(who(request), _task_keys(spec))
    await cx.upstreams(request, spec.on)
    return http.json_response(
        await cx.run(dag_ops.create_dag(cx.dep, spec, who(request).name)), 201
    )


async def list_dags(cx: Context, request: Request) -> Response:
    q: DagQuery = http.query(request, DagQuery)
    within = who(request).prefixes
    op = listing.dags_page(
        cx.dep,
        q.limit,
        *http.cursor(q),
        opt(q.status),
        opt(q.name_prefix),
        within,
        q.include_deleted,
        http.labels(q.label),
    )
    return http.json_response(await cx.run(op))


async def get_dag(cx: Context, request: Request) -> Response:
    dag: Dag = await cx.run(dag_ops.get_dag(cx.dep, await cx.dag(request)))
    return http.etag(http.json_response(dag), dag.version)


async def put_dag(cx: Context, request: Request) -> Response:
    """Create the DAG under the path's id or replace its definition (201, 200)."""
    spec = await http.decode(request, _dag_decoder)
    dag_id = dag_id_of(request.path_params["dag_id"])
    teams.require_name(who(request), spec.name)
    teams.require_keys(who(request), _task_keys(spec))
    await cx.not_others(request, dag_id, DagNotFound(dag_id))
    await cx.upstreams(request, spec.on)
    op = declare.put_dag(cx.dep, dag_id, spec, http.if_match(request), who(request).name)
    return put_answer(*(await cx.run(op)))


async def patch_dag(cx: Context, request: Request) -> Response:
    patch = await http.decode(request, _dag_patch_decoder)
    if patch.status == JobStatus.DELETED:
        raise http.validation("use DELETE to delete a DAG", "$.status")
    dag_id = await cx.dag(request)
    return http.json_response(
        await cx.run(dag_ops.set_dag_status(cx.dep, dag_id, patch.status, who(request).name))
    )


async def delete_dag(cx: Context, request: Request) -> Response:
    dag_id = await cx.dag(request)
    return http.json_response(await cx.run(dag_ops.delete_dag(cx.dep, dag_id, who(request).name)))


async def trigger_dag(cx: Context, request: Request) -> Response:
    dag_id = await cx.dag(request)
    body = await http.optional_body(request, _trigger_decoder)
    return http.json_response(
        await cx.run(dag_ops.trigger_dag(cx.dep, dag_id, who(request).name, body)), 201
    )


async def list_dag_runs(cx: Context, request: Request) -> Response:
    q: DagRunQuery = http.query(request, DagRunQuery)
    dag_id = await cx.dag(request)
    op = listing.dag_runs_page(
        cx.dep, dag_id, q.limit, *http.cursor(q), http.ms(q.since), http.ms(q.until)
    )
    return http.json_response(await cx.run(op))


async def dag_changes(cx: Context, request: Request) -> Response:
    q: ChangeQuery = http.query(request, ChangeQuery)
    dag_id = await cx.dag(request)
    op = changes.dag_changes(cx.dep, dag_id, q.limit, opt(q.cursor))
    return http.json_response(await cx.run(op))


async def get_dag_run(cx: Context, request: Request) -> Response:
    drid = dag_run_id_of(request.path_params["dag_run_id"])
    await cx.visible(request, drid, DagRunNotFound(drid))
    return http.json_response(await cx.run(dag_runs.get_dag_run(cx.dep, drid)))


async def restore_dag(cx: Context, request: Request) -> Response:
    dag_id = await cx.dag(request)
    op = dag_ops.restore_dag(cx.dep, dag_id, who(request).name)
    return http.json_response(await cx.run(op), 201)


async def cancel_dag_run(cx: Context, request: Request) -> Response:
    drid = dag_run_id_of(request.path_params["dag_run_id"])
    await cx.visible(request, drid, DagRunNotFound(drid))
    body = await http.optional_body(request, _cancel_decoder) or CancelRequest()
    op = control.cancel_dag_run(cx.dep, drid, who(request).name, body.reason)
    return http.json_response(await cx.run(op))


async def clear_dag_run(cx: Context, request: Request) -> Response:
    """Clear a task of a DAG run (its downstream, upstream, only what failed): a dry run
    returns the plan and its token; applying the token does that plan or is refused."""
    drid = dag_run_id_of(request.path_params["dag_run_id"])
    await cx.visible(request, drid, DagRunNotFound(drid))
    body = await http.decode(request, _clear_decoder)
    return http.json_response(
        await cx.run(repair.clear_tasks(cx.dep, drid, body, who(request).name))
    )


async def mark_dag_run(cx: Context, request: Request) -> Response:
    """Mark a task of a DAG run succeeded or failed, with a note."""
    drid = dag_run_id_of(request.path_params["dag_run_id"])
    await cx.visible(request, drid, DagRunNotFound(drid))
    body = await http.decode(request, _mark_decoder)
    op = repair.mark_task(cx.dep, drid, body, who(request).name)
    return http.json_response(await cx.run(op))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/dags",
        "Register a DAG",
        v.DagCreated,
        201,
        DagSpec,
        errors=(*BODY_ERRORS, 409),
        tags=("dags",),
        handler=create_dag,
    ),
    Operation(
        "get",
        "/api/v1/dags",
        "List DAGs, newest first",
        v.DagList,
        query=DagQuery,
        errors=(422,),
        tags=("dags",),
        handler=list_dags,
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}",
        "A DAG and its tasks",
        v.Dag,
        errors=(404,),
        tags=("dags",),
        handler=get_dag,
    ),
    Operation(
        "put",
        "/api/v1/dags/{dag_id}",
        "Create the DAG under this id, or replace its definition as a new version",
        v.Dag,
        body=DagSpec,
        errors=(*BODY_ERRORS, 409, 412),
        tags=("dags",),
        handler=put_dag,
    ),
    Operation(
        "patch",
        "/api/v1/dags/{dag_id}",
        "Pause or resume a DAG",
        v.Dag,
        body=DagPatch,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("dags",),
        handler=patch_dag,
    ),
    Operation(
        "delete",
        "/api/v1/dags/{dag_id}",
        "Delete a DAG, keeping its history",
        v.Dag,
        errors=(404, 409),
        tags=("dags",),
        handler=delete_dag,
    ),
    Operation(
        "post",
        "/api/v1/dags/{dag_id}/trigger",
        "Open a DAG run now (with args its tasks share)",
        v.DagTriggered,
        201,
        body=TriggerRequest,
        body_optional=True,
        errors=(404, 409, 422),
        tags=("dags",),
        handler=trigger_dag,
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}/runs",
        "A DAG's runs, newest first",
        v.DagRunList,
        query=DagRunQuery,
        errors=(404, 422),
        tags=("dags",),
        handler=list_dag_runs,
    ),
    Operation(
        "get",
        "/api/v1/dags/{dag_id}/changes",
        "Who changed, paused, deleted or triggered the DAG, and when",
        v.ChangeList,
        query=ChangeQuery,
        errors=(404, 422),
        tags=("dags",),
        handler=dag_changes,
        operation_id="list_dag_changes",
    ),
    Operation(
        "get",
        "/api/v1/dag-runs/{dag_run_id}",
        "A DAG run: every task, every attempt",
        v.DagRun,
        errors=(404,),
        tags=("dags",),
        handler=get_dag_run,
    ),
    Operation(
        "post",
        "/api/v1/dags/{dag_id}/restore",
        "Bring a deleted DAG back with its last definition, as a new incarnation (its"
        " earlier DAG runs stay in its history)",
        v.Dag,
        201,
        errors=(404, 409),
        tags=("dags",),
        handler=restore_dag,
    ),
    Operation(
        "post",
        "/api/v1/dag-runs/{dag_run_id}/cancel",
        "Cancel a DAG run and every task run of it not yet ended",
        v.DagRun,
        body=CancelRequest,
        body_optional=True,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("dags",),
        handler=cancel_dag_run,
    ),
    Operation(
        "post",
        "/api/v1/dag-runs/{dag_run_id}/clear",
        "Clear a task of a DAG run (with its downstream, upstream, or only what failed) to run"
        " it again as a new attempt; dry_run returns the plan and a token to apply it by",
        RepairPlan,
        body=ClearRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("dags",),
        handler=clear_dag_run,
        operation_id="clear_dag_run_task",
    ),
    Operation(
        "post",
        "/api/v1/dag-runs/{dag_run_id}/mark",
        "Mark a task of a DAG run succeeded or failed, with a note; its skipped downstream is"
        " decided again; dry_run returns the plan and a token",
        RepairPlan,
        body=MarkRequest,
        errors=(*BODY_ERRORS, 404, 409),
        tags=("dags",),
        handler=mark_dag_run,
        operation_id="mark_dag_run_task",
    ),
)
