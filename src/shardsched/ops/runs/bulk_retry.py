"""Retry many dead-lettered runs at once: the ones named, or every one the failure inbox
lists for a filter; with a dry run first. Each run goes through the same script as a
single retry (lua/retry_run.lua), so a run retried twice still runs once, and each
refusal is reported with what to do instead (a DAG task's run: trigger its DAG again)."""

from __future__ import annotations

from collections.abc import Sequence

from shardsched.core.access import SDK_ACTOR
from shardsched.core.errors import ConflictError, NotFoundError
from shardsched.core.models import RunState
from shardsched.core.views import BulkRetry, RetryRefusal, Run
from shardsched.ops import listing
from shardsched.ops.pagination import parse_cursor
from shardsched.ops.runs.by_id import get_run, retry_run
from shardsched.store.calls import Op
from shardsched.store.deployment import Deployment

#: Runs one request retries at most.
BULK_MAX = 1000


def selected(
    dep: Deployment,
    since_ms: int | None,
    until_ms: int | None,
    name_prefix: str | None,
    within: tuple[str, ...],
) -> Op:
    """The dead-lettered runs the failure inbox lists for a filter (at most BULK_MAX)."""
    out: list[str] = []
    cursor = None
    while len(out) < BULK_MAX:
        page = yield from listing.failures_page(
            dep, 500, cursor, frozenset({RunState.DEAD_LETTER}), since_ms, until_ms,
            name_prefix, within,
        )  # fmt: skip
        out += [r.run_id for r in page.runs]
        if page.next_cursor is None:
            break
        cursor = parse_cursor(page.next_cursor)
    return out[:BULK_MAX]


def retry_many(
    dep: Deployment, run_ids: Sequence[str], actor: str = SDK_ACTOR, dry_run: bool = False
) -> Op:
    """Retry each run (dry run: say which would be retried, write nothing)."""
    retried: list[Run] = []
    would: list[str] = []
    refused: list[RetryRefusal] = []
    for rid in dict.fromkeys(run_ids):
        try:
            if dry_run:
                run = yield from get_run(dep, rid)
                why = _why_not(run)
                if why:
                    refused.append(RetryRefusal(run_id=rid, reason=why))
                else:
                    would.append(rid)
            else:
                retried.append((yield from retry_run(dep, rid, actor)))
        except (ConflictError, NotFoundError) as exc:
            refused.append(RetryRefusal(run_id=rid, reason=str(exc)))
    return BulkRetry(dry_run=dry_run, retried=retried, would_retry=would, refused=refused)


def _why_not(run: Run) -> str | None:
    if run.state != RunState.DEAD_LETTER:
        return f"run {run.run_id!r} is not dead-lettered ({run.state})"
    if run.next_run_id:
        return f"run {run.run_id!r} was already retried as {run.next_run_id!r}"
    return None
