"""``shardsched worker --deploy MODULE:APP``: a real worker process serves an App's
handlers and deploys it before claiming; a later deploy wins over it; a declaration the
service refuses stops it. The handler's own record of what ran is the independent check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import trio

from conftest import RedisServer, child_env, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.core.models import JobStatus
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis

MODULE = """
import shardsched
from pathlib import Path

app = shardsched.App("billing")


@app.job(every="1h", args={{"who": "{who}"}})
def invoices(ctx):
    with open({record!r}, "a") as out:
        out.write(f"{{ctx.run_id}} {{ctx.args['who']}}\\n")
"""


def worker(server: RedisServer, namespace: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            shardsched_cmd(
                "worker", "--redis", server.url, "--namespace", namespace,
                "--deploy", "billing_jobs:app", "--log-level", "info",
            ),
            cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=child_env(),
        )  # fmt: skip


async def test_a_worker_deploys_its_app_and_runs_its_handlers(
    node, redis: Redis, redis_server: RedisServer, dep: ops.Deployment, namespace: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    record, log = tmp_path / "ran", tmp_path / "worker.log"
    (tmp_path / "billing_jobs.py").write_text(MODULE.format(who="first", record=str(record)))
    proc = worker(redis_server, namespace, tmp_path, log)
    try:

        async def deployed():
            try:
                return await drive_async(ops.get_job(dep, "invoices"), redis)
            except Exception:
                return None

        job = await wait_until(deployed, timeout=30)
        assert job.labels == {"apply-set": "app:billing"} and job.args == {"who": "first"}
        run_id = (await drive_async(ops.trigger(dep, "invoices"), redis)).run_id

        async def ran():
            return record.exists() and record.read_text()

        await wait_until(ran, timeout=30)
        assert record.read_text() == f"{run_id} first\n", "the handler ran, once"
        assert "app billing deployed (generation 1): 1 created" in log.read_text()
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)
    # a second worker of the next release: the job changes, its pause stays
    await drive_async(ops.patch_job(dep, "invoices", _paused()), redis)
    (tmp_path / "billing_jobs.py").write_text(MODULE.format(who="second", record=str(record)))
    proc = worker(redis_server, namespace, tmp_path, log)
    try:

        async def changed():
            job = await drive_async(ops.get_job(dep, "invoices"), redis)
            return job if job.args == {"who": "second"} else None

        job = await wait_until(changed, timeout=30)
        assert job.status == JobStatus.PAUSED, "a deploy never resumes"
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)


def _paused():
    from shardsched.core.models import JobStatus
    from shardsched.core.patches import JobPatch

    return JobPatch(status=JobStatus.PAUSED)


async def test_a_declaration_the_service_refuses_stops_the_worker(
    node, redis: Redis, redis_server: RedisServer, dep: ops.Deployment, namespace: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    from shardsched.core.models import IntervalSchedule, JobSpec

    await drive_async(
        ops.create_job(dep, JobSpec(name="x", command="true", schedule=IntervalSchedule(60),
                                    id="invoices")), redis
    )  # fmt: skip
    (tmp_path / "billing_jobs.py").write_text(MODULE.format(who="x", record="/dev/null"))
    log = tmp_path / "worker.log"
    proc = worker(redis_server, namespace, tmp_path, log)
    code = await trio.to_thread.run_sync(lambda: proc.wait(timeout=30))
    assert code != 0
    assert "'invoices' exists and belongs to no app" in log.read_text()
    assert "Traceback" not in log.read_text()
