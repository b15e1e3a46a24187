"""The one table of the SDK's operations: every client (``Client`` on redis-py,
``AsyncClient`` on trio, and any later transport) binds each of these plans under this
name, and ``tests/sdk/test_operation_table.py`` fails when a client lacks one, binds one
under another name, or a plan is written that the table does not list.

A plan (:mod:`.plans`) is transport-free: it says what to send and how to read the
replies; a client only drives it. So a client is this table plus a driver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardsched.sdk import plans
from shardsched.sdk.plans import (
    apps,
    concurrency,
    dags,
    events,
    jobs,
    notify,
    runs,
    schedules,
    ticks,
)

#: The plans every client binds, by method name (``add_jobs``, the bulk registration
#: that pipelines its batches, is each driver's own: :data:`DRIVER_METHODS`).
OPERATIONS: dict[str, Callable[..., plans.Plan[Any]]] = {
    # jobs
    "add_job": jobs.add_job,
    "put_job": jobs.put_job,
    "get_job": jobs.get_job,
    "jobs_named": jobs.jobs_named,
    "list_jobs": jobs.list_jobs,
    "update_job": jobs.update_job,
    "pause": jobs.pause,
    "resume": jobs.resume,
    "delete_job": jobs.delete_job,
    "restore_job": jobs.restore_job,
    "trigger": jobs.trigger,
    # a job's history and schedule
    "job_versions": jobs.job_versions,
    "job_stats": ticks.job_stats,
    "upcoming_fires": ticks.upcoming_fires,
    "resume_job": ticks.resume_job,
    "job_changes": jobs.job_changes,
    "list_events": runs.list_events,
    "dag_changes": dags.dag_changes,
    "backfill": ticks.backfill,
    "next_fire_times": schedules.next_fire_times,
    # runs
    "get_run": runs.get_run,
    "list_runs": runs.list_runs,
    "get_output": runs.get_output,
    "list_dead_letter": runs.list_dead_letter,
    "list_failures": runs.list_failures,
    "retry_run": runs.retry_run,
    "cancel_run": runs.cancel_run,
    "retry_runs": runs.retry_runs,
    "cancel_dag_run": dags.cancel_dag_run,
    "clear_task": dags.clear_task,
    "mark_task": dags.mark_task,
    "list_runs_under_way": runs.list_runs_under_way,
    # notifications
    "put_channel": notify.put_channel,
    "list_channels": notify.list_channels,
    "delete_channel": notify.delete_channel,
    "add_rule": notify.add_rule,
    "put_rule": notify.put_rule,
    "list_rules": notify.list_rules,
    "delete_rule": notify.delete_rule,
    "test_channel": notify.test_channel,
    "list_deliveries": notify.list_deliveries,
    "get_delivery": notify.get_delivery,
    # calendars
    "put_calendar": schedules.put_calendar,
    "get_calendar": schedules.get_calendar,
    "list_calendars": schedules.list_calendars,
    "delete_calendar": schedules.delete_calendar,
    # DAGs
    "add_dag": dags.add_dag,
    "put_dag": dags.put_dag,
    "get_dag": dags.get_dag,
    "list_dags": dags.list_dags,
    "pause_dag": dags.pause_dag,
    "resume_dag": dags.resume_dag,
    "delete_dag": dags.delete_dag,
    "restore_dag": dags.restore_dag,
    "trigger_dag": dags.trigger_dag,
    "list_dag_runs": dags.list_dag_runs,
    "get_dag_run": dags.get_dag_run,
    # concurrency keys
    "set_concurrency_limits": concurrency.set_concurrency_limits,
    "clear_concurrency_limits": concurrency.clear_concurrency_limits,
    "get_concurrency_key": concurrency.get_concurrency_key,
    "list_concurrency_keys": concurrency.list_concurrency_keys,
    # apps: schedules declared in code
    "deploy_app": apps.deploy_app,
    # events: emitted, read back with their one outcome
    "emit": events.emit,
    "get_event": events.get_event,
}

#: Methods each client writes for itself (they drive several plans, pipelined).
DRIVER_METHODS = ("add_jobs", "each")

#: Plans that are parts of another operation, not operations of their own.
PARTS = (jobs.add_validated,)
