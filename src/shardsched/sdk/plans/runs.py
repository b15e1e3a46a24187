"""Plans on runs: one run and its output, a job's runs, the dead letter, the failure
inbox, what is under way, the event stream, retry and cancel."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from shardsched import ops
from shardsched.core.instants import given_ms
from shardsched.core.models import (
    RunState,
)
from shardsched.core.views import (
    BulkRetry,
    EventList,
    Run,
    RunList,
    RunOutput,
)
from shardsched.ops import listing
from shardsched.ops.pagination import parse_cursor
from shardsched.ops.runs import bulk_retry, control
from shardsched.ops.runs.active import Active, Filters, active_page
from shardsched.ops.runs.events import events_page
from shardsched.sdk.plans import Handle, Plan, page_size


def _ms(when: datetime | None, field: str) -> int | None:
    return None if when is None else given_ms(when, field)


def get_run(c: Handle, run_id: str) -> Plan[Run]:
    return Plan(ops.get_run(c.deployment, run_id))


def list_runs(
    c: Handle,
    job_id: str,
    limit: int = 50,
    cursor: str | None = None,
    state: RunState | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Plan[RunList]:
    """A page of a job's runs, newest first by scheduled_for."""
    page_size(limit)
    op = listing.runs_page(
        c.deployment,
        job_id,
        limit,
        parse_cursor(cursor),
        state,
        _ms(since, "$.since"),
        _ms(until, "$.until"),
    )
    return Plan(op)


def get_output(c: Handle, run_id: str) -> Plan[RunOutput]:
    return Plan(ops.get_output(c.deployment, run_id))


def list_dead_letter(c: Handle, limit: int = 50, cursor: str | None = None) -> Plan[RunList]:
    page_size(limit)
    return Plan(listing.dead_letter_page(c.deployment, limit, parse_cursor(cursor)))


def list_failures(
    c: Handle,
    limit: int = 50,
    cursor: str | None = None,
    states: Iterable[RunState] = listing.FAILURE_STATES,
    since: datetime | None = None,
    until: datetime | None = None,
    name_prefix: str | None = None,
) -> Plan[RunList]:
    """The failure inbox: failed and dead-lettered runs of every job, latest first."""
    page_size(limit)
    op = listing.failures_page(
        c.deployment,
        limit,
        parse_cursor(cursor),
        frozenset(states),
        _ms(since, "$.since"),
        _ms(until, "$.until"),
        name_prefix,
    )
    return Plan(op)


def retry_run(c: Handle, run_id: str) -> Plan[Run]:
    """Send a dead-lettered run back as a new attempt."""
    return Plan(ops.retry_run(c.deployment, run_id, c.actor))


def list_runs_under_way(
    c: Handle,
    state: str = "running",
    limit: int = 50,
    cursor: str | None = None,
    job_id: str | None = None,
    queue: str | None = None,
    worker: str | None = None,
    labels: dict[str, str] | None = None,
) -> Plan[RunList]:
    """Runs in ``state`` (running, queued, waiting or retrying) across jobs, by shard and
    place in line; follow ``next_cursor`` until it is None (a page may be short)."""
    page_size(limit)
    filters = Filters(job_id, queue, worker, labels or {})
    return Plan(
        active_page(c.deployment, Active.parse(state), limit, parse_cursor(cursor), filters)
    )


def cancel_run(c: Handle, run_id: str, reason: str = "") -> Plan[Run]:
    """Cancel a run: it ends ``cancelled`` with who and why, and is not retried; a running
    one is stopped (SIGTERM, then SIGKILL after its job's ``kill_grace_s``) at its
    worker's next lease renewal."""
    return Plan(control.cancel_run(c.deployment, run_id, c.actor, reason))


def retry_runs(c: Handle, run_ids: Sequence[str], dry_run: bool = False) -> Plan[BulkRetry]:
    """Retry many dead-lettered runs (each refusal says why and what to do instead)."""
    return Plan(bulk_retry.retry_many(c.deployment, list(run_ids), c.actor, dry_run))


def list_events(
    c: Handle,
    job_id: str | None = None,
    run_id: str | None = None,
    state: str | None = None,
    limit: int = 100,
    after: str | None = None,
    since: datetime | None = None,
) -> Plan[EventList]:
    """The shards' events (what ``GET /events`` answers), oldest first from the cursor
    ``after`` (or ``since``, or the oldest kept), filtered by job, run and new state;
    ``next_cursor`` is where to continue, also when caught up."""
    page_size(limit)
    since_ms = None if since is None else given_ms(since, "$.since")
    return Plan(events_page(c.deployment, limit, after, since_ms, job_id, run_id, state))
