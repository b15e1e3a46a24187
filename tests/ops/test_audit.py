"""``shardsched audit``: exact accounting, JSON for scripts, non-zero exit on loss."""

from __future__ import annotations

import json
import subprocess

import trio

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import IntervalSchedule, JobSpec, ops
from shardsched.core.instants import to_ms
from shardsched.store.drive import drive_async
from waits import server_clock_passes


def audit_cli(url: str, namespace: str) -> tuple[int, dict]:
    out = subprocess.run(
        shardsched_cmd(
            "audit", "--redis", url, "--namespace", namespace, "--json", "--settle", "1"
        ),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=30,
    )
    return out.returncode, json.loads(out.stdout)


async def test_audit_counts_and_exit_codes(node, redis, redis_server, dep) -> None:
    spec = JobSpec(name="a", schedule=IntervalSchedule(every_s=0.5), command="true")
    jobs = await drive_async(ops.create_jobs(dep, [spec, spec]), redis)
    job_id = jobs[0].job_id
    sk = dep.keys_for(job_id)

    async def enough_runs() -> bool:
        return await redis.execute("ZCARD", sk.runs_of(job_id)) >= 5

    await wait_until(enough_runs)
    paused = await drive_async(ops.patch_job(dep, job_id, ops_patch_paused()), redis)
    # past the audit's settle margin (1 s): every tick so far is judged
    await server_clock_passes(redis, to_ms(paused.paused_at) + 1200)

    code, report = await trio.to_thread.run_sync(audit_cli, redis_server.url, dep.namespace)
    assert code == 0, report
    assert report["missing"] == 0 and report["duplicated"] == 0
    assert report["jobs"] == 2 and report["fired"] == report["expected"] >= 8
    assert report["lag_s"]["count"] == report["fired"] and report["lag_s"]["max"] < 1

    # Lose one firing: the audit must notice and fail.
    victim = (await redis.execute("ZRANGE", sk.runs_of(job_id), 0, 0))[0].decode()
    tick = int(victim.split(":")[1])
    await redis.execute("DEL", sk.run(victim))
    code, report = await trio.to_thread.run_sync(audit_cli, redis_server.url, dep.namespace)
    assert code == 1 and report["missing"] == 1
    assert report["problem_jobs"][0]["job_id"] == job_id

    # A tick both fired and recorded skipped is a double decision.
    other = (await redis.execute("ZRANGE", sk.runs_of(job_id), 1, 1))[0].decode()
    other_tick = int(other.split(":")[1])
    await redis.execute("ZADD", sk.skips(job_id), other_tick, f"{other_tick}:{other_tick}:1:x:0")
    code, report = await trio.to_thread.run_sync(audit_cli, redis_server.url, dep.namespace)
    assert code == 1 and report["missing"] == 1 and report["duplicated"] == 1
    assert tick != other_tick


def ops_patch_paused():
    from shardsched.core.models import JobStatus
    from shardsched.core.patches import JobPatch

    return JobPatch(status=JobStatus.PAUSED)
