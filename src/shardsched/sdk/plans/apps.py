"""Plans of apps: deploy the jobs and DAGs an App declares in code (core/apps.py)."""

from __future__ import annotations

from shardsched.core.apps import App, an_app
from shardsched.core.deploys import DeployResult
from shardsched.ops.apps import deploy
from shardsched.sdk.plans import Handle, Plan


def deploy_app(c: Handle, app: App, dry_run: bool = False) -> Plan[DeployResult]:
    """Make the service match what ``app`` declares, within its own set only: each job
    and DAG created, changed (a new version; its pause state and history stay) or left
    unchanged, and what the app no longer declares pruned. ``dry_run``: what would change,
    nothing written. Raises Superseded when a later deploy of the app overtook this one,
    NotOwned when a declared id exists outside the app's set."""
    app = an_app(app)
    op = deploy.deploy_app(
        c.deployment, app.name, dict(app.jobs()), dict(app.dags()), dry_run, c.actor
    )
    return Plan(op)
