"""Apps: deploy the jobs and DAGs an app declares in code (core/apps.py) as one set,
``POST /api/v1/apps/{app}/deploy`` (ops/apps/deploy.py). The handler sits beside its
route (:data:`ROUTES`)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.deploys import DeployRequest, DeployResult
from shardsched.core.errors import DagNotFound, JobNotFound
from shardsched.core.ids import dag_id_of
from shardsched.ops.access import teams
from shardsched.ops.apps.deploy import deploy_app
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import who
from shardsched.router.operation import BODY_ERRORS, Operation

_request_decoder = msgspec.json.Decoder(DeployRequest)


async def deploy(cx: Context, request: Request) -> Response:
    """Make the service match the app's declarations (``dry_run``: say what would
    change). A team's token declares only names and keys of its own, and ids free or its
    own; it prunes only what it sees."""
    app: str = request.path_params["app"]  # checked first thing by the operation
    body = await http.decode(request, _request_decoder)
    caller = who(request)
    for job_id, spec in body.jobs.items():
        teams.require_name(caller, spec.name)
        teams.require_keys(caller, [(spec.concurrency_key, "$.concurrency_key")])
        await cx.not_others(request, job_id, JobNotFound(job_id))
        await cx.upstreams(request, spec.on)
    for dag_id, dag in body.dags.items():
        teams.require_name(caller, dag.name)
        keys = [(t.concurrency_key, "$.tasks.concurrency_key") for t in dag.tasks]
        teams.require_keys(caller, keys)
        await cx.not_others(request, dag_id_of(dag_id), DagNotFound(dag_id))
        await cx.upstreams(request, dag.on)
    op = deploy_app(
        cx.dep, app, body.jobs, body.dags, body.dry_run, caller.name, tuple(caller.prefixes)
    )
    result: DeployResult = await cx.run(op)
    return http.json_response(result)


ROUTES = (
    Operation(
        "post",
        "/api/v1/apps/{app}/deploy",
        "Deploy an app: create, change, leave or prune its jobs and DAGs, only within its"
        " own set; dry_run says what would change. A later deploy of the same app"
        " supersedes an earlier one still running (409 superseded for the earlier)",
        DeployResult,
        body=DeployRequest,
        errors=(*BODY_ERRORS, 409),
        tags=("apps",),
        handler=deploy,
        operation_id="deploy_app",
    ),
)
