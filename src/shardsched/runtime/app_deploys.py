"""A worker's opt-in deploy of its apps at start (``shardsched worker --deploy``): the
deploy operation (ops/apps/deploy.py) driven once, before the worker claims anything,
with what an operator needs to read of it in the log."""

from __future__ import annotations

import logging

import msgspec

from shardsched import ops
from shardsched.core.apps import App
from shardsched.core.deploys import DeployResult
from shardsched.core.errors import ShardschedError, Superseded
from shardsched.ops.apps.deploy import deploy_app
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis, RedisError

log = logging.getLogger(__name__)


async def deploy_app_at_start(redis: Redis, dep: ops.Deployment, app: App) -> None:
    """Deploy ``app``; a later deploy of it winning is logged, a refusal (a declaration,
    NotOwned, the worker's ACL role) ends the process with the reason (SystemExit)."""
    op = deploy_app(dep, app.name, dict(app.jobs()), dict(app.dags()), False, "worker")
    try:
        result: DeployResult = await drive_async(op, redis)
    except Superseded as exc:
        log.info("deploy of app %s: %s", app.name, exc)
        return
    except (ShardschedError, msgspec.ValidationError) as exc:
        raise SystemExit(f"shardsched: --deploy {app.name}: {exc}") from None
    except RedisError as exc:  # NOPERM: the worker's ACL role writes no definitions
        raise SystemExit(
            f"shardsched: --deploy {app.name}: Redis refused it ({exc}); a deploy writes"
            " definitions: give this worker a Redis user of the node's role, or deploy"
            " with `shardsched deploy`"
        ) from None
    tally = result.counts()
    counts = ", ".join(f"{n} {what}" for what, n in tally.items()) or "nothing declared"
    changed = set(tally) - {"unchanged"}  # a change of definitions is said at WARNING
    (log.warning if changed else log.info)(
        "app %s deployed (generation %s): %s", app.name, result.generation, counts
    )
