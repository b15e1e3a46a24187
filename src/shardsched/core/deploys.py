"""What a deploy of an app (``shardsched deploy``, ops/apps/deploy.py) is asked and
answers: the body of ``POST /api/v1/apps/{app}/deploy`` and its changes."""

from __future__ import annotations

from typing import Any

import msgspec

from shardsched.core.models import DagSpec, JobSpec


class DeployRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The jobs and DAGs an app declares, by id (a DAG's with or without ``dag_``)."""

    jobs: dict[str, JobSpec] = msgspec.field(default_factory=dict)
    dags: dict[str, DagSpec] = msgspec.field(default_factory=dict)
    dry_run: bool = False


class DeployChange(msgspec.Struct, omit_defaults=True):
    """One job's or DAG's part in a deploy. ``action``: created, changed (a new
    version), unchanged or pruned (deleted; its history stays). ``before`` and ``after``:
    the definition there and the one declared (defaults left out), for a diff;
    ``version``: what a write left it at (None when nothing was written: a dry run, or
    unchanged)."""

    kind: str  #: job | dag
    id: str
    action: str
    version: int | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


class DeployResult(msgspec.Struct):
    """A deploy's outcome: every change in the order made. ``generation``: the deploy's
    (its claim's order decides which of two racing deploys is the newer); None for a
    dry run, which writes nothing."""

    app: str
    dry_run: bool
    generation: int | None
    changes: list[DeployChange]

    def counts(self) -> dict[str, int]:
        """How many of each action."""
        out: dict[str, int] = {}
        for change in self.changes:
            out[change.action] = out.get(change.action, 0) + 1
        return out
