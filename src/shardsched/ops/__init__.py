"""The operations used alike by the router, the SDK and the CLI.

Each is a generator over :class:`~shardsched.store.calls.Call` batches (no I/O of its own);
drive it with ``store/drive.drive_async`` on the trio client, or the SDK's driver on redis-py.
The verbs on jobs and runs are re-exported here; the rest are grouped by resource in
the subpackages (``ops.jobs``, ``ops.dags``, ``ops.runs``, ``ops.history``,
``ops.schedules``, ``ops.notify``, ``ops.access``, ``ops.deployment``), and the read
machinery they share sits at the top (``pagination``, ``listing``, ``recent``, ``cold``).
"""

from shardsched.ops.jobs.actions import delete_job, restore_job, resume_if_due, trigger
from shardsched.ops.jobs.change import patch_job
from shardsched.ops.jobs.define import (
    create_job,
    create_jobs,
    validate_specs,
)
from shardsched.ops.jobs.read import get_job
from shardsched.ops.jobs.versions import backfill, job_versions
from shardsched.ops.runs.by_id import get_output, get_run, retry_run
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment, open_deployment

__all__ = [
    "Call",
    "Deployment",
    "Op",
    "backfill",
    "check",
    "create_job",
    "create_jobs",
    "delete_job",
    "get_job",
    "get_output",
    "get_run",
    "job_versions",
    "open_deployment",
    "patch_job",
    "restore_job",
    "resume_if_due",
    "retry_run",
    "trigger",
    "validate_specs",
]
