"""A job's environment is an allowlist: PATH, HOME, LANG, LC_ALL, TZ, its run's
SHARDSCHED_* variables and what the operator passes with --pass-env. Never the worker's
Redis URL (with its password) or any other secret of the worker's environment."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from conftest import child_env
from shardsched import ops
from shardsched.store.drive import drive_async
from workers import once_job, start_worker, wait_run

pytestmark = pytest.mark.processes

ALLOWED = {"PATH", "HOME", "LANG", "LC_ALL", "TZ"}


async def test_a_job_sees_only_the_allowlist(
    redis_server, redis, dep, node, tmp_path: Path
) -> None:
    env = {
        **child_env(),
        "SHARDSCHED_REDIS_URL": "redis://:hunter2@127.0.0.1:1/0",
        "AWS_SECRET_ACCESS_KEY": "not-for-jobs",
        "TEAM_TOKEN": "passed-on-purpose",
        "HOME": os.environ.get("HOME", "/root"),
    }
    worker = start_worker(
        redis_server.url,
        dep.namespace,
        "env-w",
        tmp_path / "worker.log",
        "--pass-env",
        "TEAM_TOKEN",
        env=env,
    )
    try:
        job_id = await once_job(redis, dep, "env", lease_s=10)
        (run,) = await wait_run(redis, dep, job_id, "succeeded", by="env-w")
        out = (await drive_async(ops.get_output(dep, run.run_id), redis)).output
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    seen = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    names = set(seen) - {"PWD", "SHLVL", "_", "OLDPWD"}  # what /bin/sh sets itself
    unexpected = {n for n in names if n not in ALLOWED and not n.startswith("SHARDSCHED_")}
    assert unexpected == {"TEAM_TOKEN"}, out
    assert seen["TEAM_TOKEN"] == "passed-on-purpose"
    assert "SHARDSCHED_REDIS_URL" not in seen and "hunter2" not in out
    assert "AWS_SECRET_ACCESS_KEY" not in seen
    assert seen["SHARDSCHED_RUN_ID"] == run.run_id and seen["SHARDSCHED_JOB_ID"] == job_id
    assert {n for n in names if n.startswith("SHARDSCHED_")} <= {
        "SHARDSCHED_RUN_ID",
        "SHARDSCHED_JOB_ID",
        "SHARDSCHED_ATTEMPT",
        "SHARDSCHED_ARGS",
        "SHARDSCHED_SCHEDULED_FOR",
        "SHARDSCHED_DAG_RUN_ID",
        "SHARDSCHED_LIFELINE",  # the marker that takes stray descendants down with the worker
    }, out
