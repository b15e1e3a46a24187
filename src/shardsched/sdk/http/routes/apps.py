"""Routes of apps (:mod:`.` says what a route is)."""

from __future__ import annotations

from shardsched.core.apps import App, an_app
from shardsched.core.deploys import DeployRequest, DeployResult
from shardsched.sdk.http.calls import HttpCall, segment
from shardsched.sdk.http.routes.jobs import V1


def deploy_app(app: App, dry_run: bool = False) -> HttpCall[DeployResult]:
    app = an_app(app)
    body = DeployRequest(dict(app.jobs()), dict(app.dags()), dry_run)
    path = f"{V1}/apps/{segment(app.name, ValueError)}/deploy"
    return HttpCall("POST", path, DeployResult, body=body, idempotent=True)
