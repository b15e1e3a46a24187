"""The one table of the SDK's operations: every client (``Client`` on redis-py,
``AsyncClient`` on trio, and any later transport) binds each of these plans under this
name, and ``tests/sdk/test_operation_table.py`` fails when a client lacks one, binds one
under another name, or a plan is written that the table does not list.

A plan (:mod:`.plans`) is transport-free: it says what to send and how to read the
replies; a client only drives it. So a client is this table plus a driver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardsched.sdk import control_plans, history_plans, notify_plans, plans

#: The plans every client binds, by method name (``add_jobs``, the bulk registration
#: that pipelines its batches, is each driver's own: :data:`DRIVER_METHODS`).
OPERATIONS: dict[str, Callable[..., plans.Plan[Any]]] = {
    # jobs
    "add_job": plans.add_job,
    "put_job": plans.put_job,
    "get_job": plans.get_job,
    "jobs_named": plans.jobs_named,
    "list_jobs": plans.list_jobs,
    "update_job": plans.update_job,
    "pause": plans.pause,
    "resume": plans.resume,
    "delete_job": plans.delete_job,
    "restore_job": control_plans.restore_job,
    "trigger": plans.trigger,
    # a job's history and schedule
    "job_versions": history_plans.job_versions,
    "job_stats": history_plans.job_stats,
    "resume_job": history_plans.resume_job,
    "job_changes": history_plans.job_changes,
    "list_events": history_plans.list_events,
    "dag_changes": history_plans.dag_changes,
    "backfill": history_plans.backfill,
    "next_fire_times": history_plans.next_fire_times,
    # runs
    "get_run": plans.get_run,
    "list_runs": plans.list_runs,
    "get_output": plans.get_output,
    "list_dead_letter": plans.list_dead_letter,
    "list_failures": plans.list_failures,
    "retry_run": plans.retry_run,
    "cancel_run": control_plans.cancel_run,
    "retry_runs": control_plans.retry_runs,
    "cancel_dag_run": control_plans.cancel_dag_run,
    "list_runs_under_way": control_plans.list_runs_under_way,
    # notifications
    "put_channel": notify_plans.put_channel,
    "list_channels": notify_plans.list_channels,
    "delete_channel": notify_plans.delete_channel,
    "add_rule": notify_plans.add_rule,
    "put_rule": notify_plans.put_rule,
    "list_rules": notify_plans.list_rules,
    "delete_rule": notify_plans.delete_rule,
    "test_channel": notify_plans.test_channel,
    "list_deliveries": notify_plans.list_deliveries,
    "get_delivery": notify_plans.get_delivery,
    # calendars
    "put_calendar": notify_plans.put_calendar,
    "get_calendar": notify_plans.get_calendar,
    "list_calendars": notify_plans.list_calendars,
    "delete_calendar": notify_plans.delete_calendar,
    # DAGs
    "add_dag": plans.add_dag,
    "put_dag": plans.put_dag,
    "get_dag": plans.get_dag,
    "list_dags": plans.list_dags,
    "pause_dag": plans.pause_dag,
    "resume_dag": plans.resume_dag,
    "delete_dag": plans.delete_dag,
    "restore_dag": control_plans.restore_dag,
    "trigger_dag": plans.trigger_dag,
    "list_dag_runs": plans.list_dag_runs,
    "get_dag_run": plans.get_dag_run,
    # concurrency keys
    "set_concurrency_limits": plans.set_concurrency_limits,
    "clear_concurrency_limits": plans.clear_concurrency_limits,
    "get_concurrency_key": plans.get_concurrency_key,
    "list_concurrency_keys": plans.list_concurrency_keys,
}

#: Methods each client writes for itself (they drive several plans, pipelined).
DRIVER_METHODS = ("add_jobs",)

#: Plans that are parts of another operation, not operations of their own.
PARTS = (plans.add_validated,)
