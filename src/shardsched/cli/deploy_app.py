"""``shardsched deploy MODULE:APP``: make the service match the jobs and DAGs an app
declares in code (core/apps.py), within the app's own set only, through the API
(``POST /api/v1/apps/{app}/deploy``, ops/apps/deploy.py); ``--dry-run`` shows each
change as a diff and writes nothing."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable
from typing import Any

import msgspec

from shardsched.cli.definitions import yaml_lines
from shardsched.cli.http import CliError, request
from shardsched.cli.render import quoted
from shardsched.core.apps import load_app
from shardsched.core.deploys import DeployRequest


def run_deploy(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    try:
        app = load_app(args.app)
        body = DeployRequest(dict(app.jobs()), dict(app.dags()), args.dry_run)
    except ValueError as exc:  # ValidationError too: a declaration the API would refuse
        raise CliError(str(exc)) from None
    if not body.jobs and not body.dags and not args.allow_empty:
        raise CliError(
            f"app {app.name!r} in {args.app} declares no job or DAG: deploying it would"
            " prune every one it has (a module that lost its decorators?); --allow-empty"
            " if that is meant"
        )
    path = f"/api/v1/apps/{quoted(app.name)}/deploy"
    result = request(args.api, "POST", path, msgspec.to_builtins(body))
    return result, show


def show(result: dict[str, Any]) -> str:
    """Each change on a line (a changed one with its diff), then the counts."""
    lines = []
    for c in result["changes"]:
        version = f" (version {c['version']})" if c.get("version") else ""
        lines.append(f"{c['action']:9} {c['kind']} {c['id']}{version}")
        if c["action"] == "changed":
            diff = difflib.unified_diff(
                yaml_lines(c.get("before")), yaml_lines(c.get("after")), lineterm="", n=1
            )
            lines += [f"    {line}" for line in list(diff)[2:]]
    tally: dict[str, int] = {}
    for c in result["changes"]:
        tally[c["action"]] = tally.get(c["action"], 0) + 1
    counts = ", ".join(f"{n} {what}" for what, n in tally.items()) or "nothing declared"
    app = result["app"]
    if result["dry_run"]:
        return "\n".join([*lines, f"(dry run of app {app}: nothing written) {counts}"])
    return "\n".join([*lines, f"app {app} deployed (generation {result['generation']}): {counts}"])


def add_deploy_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "deploy",
        parents=[common],
        help="make the service match the jobs and DAGs an app declares in code",
        description="Import MODULE (the working directory on the path) and deploy its"
        " shardsched.App: each job and DAG it declares is created, changed (a new version;"
        " its pause state and history stay) or left unchanged, and the jobs and DAGs of the"
        " app's own set it no longer declares are pruned (deleted, history kept). Nothing"
        " outside the app's set is touched: an id that exists outside it is refused. Of two"
        " deploys of one app at once, the one that started later wins; the earlier stops"
        " (superseded). --dry-run shows each change as a diff and writes nothing.",
    )
    p.add_argument("app", metavar="MODULE:APP", help="e.g. billing.jobs:app")
    p.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="deploy an app that declares nothing (pruning all it had)",
    )
