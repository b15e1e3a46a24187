"""What a worker lets a job do, on real processes: the job's own env map, --run-as,
per-job memory, CPU-time and open-file limits, and restricted pools (handlers only, or
allowed commands only) that run nothing else even if the API is abused."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest
import trio

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.core.patches import JobPatch
from shardsched.ops import listing
from shardsched.store.drive import drive_async
from shardsched.worker import handlers
from shardsched.worker.sandbox import CommandPolicy, Sandbox
from shardsched.worker.worker import Worker

NOW = OnceSchedule(at=from_ms(0))
pytestmark = pytest.mark.processes


@handlers.handler("sandbox-ping")
async def _ping(ctx: handlers.HandlerContext) -> None:
    """An in-process handler, for the handlers-only pool."""


async def start(nursery, redis, dep, **options) -> Worker:
    w = Worker(redis, dep, "sandboxed", concurrency=4, **options)
    await nursery.start(w.run)
    return w


async def finished(redis, dep, job_id: str, timeout: float = 20):
    async def done():
        runs = (await drive_async(listing.runs_page(dep, job_id, 5), redis)).runs
        return next((r for r in runs if r.state in ("succeeded", "failed")), None)

    return await wait_until(done, timeout=timeout)


async def job(redis, dep, command: str, **fields) -> str:
    spec = JobSpec(name="sb", schedule=NOW, command=command, **fields)
    return (await drive_async(ops.create_job(dep, spec), redis)).job_id


async def output(redis, dep, run) -> str:
    return (await drive_async(ops.get_output(dep, run.run_id), redis)).output


async def test_a_job_has_its_own_env_map(node, nursery, redis, dep, http) -> None:
    await start(nursery, redis, dep)
    job_id = await job(redis, dep, 'echo "$GREETING $SHARDSCHED_ATTEMPT"', env={"GREETING": "hi"})
    run = await finished(redis, dep, job_id)
    assert run.state == "succeeded" and await output(redis, dep, run) == "hi 1\n"
    got = await drive_async(ops.get_job(dep, job_id), redis)
    assert got.env == {"GREETING": "hi"}
    patched = await drive_async(ops.patch_job(dep, job_id, JobPatch(env={})), redis)
    assert patched.env == {}
    body = {"name": "x", "command": "true", "schedule": {"type": "interval", "every_s": 60}}
    for bad in ({"SHARDSCHED_RUN_ID": "forged"}, {"1X": "a"}, {"A-B": "a"}, {"A": "x" * 5000}):
        reply = await http.post("/api/v1/jobs", json={**body, "env": bad})
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["details"]["field"].startswith("$.env")


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
async def test_run_as_drops_privileges(node, nursery, redis, dep) -> None:
    nobody = pwd.getpwnam("nobody")
    await start(nursery, redis, dep, sandbox=Sandbox.make(run_as="nobody"))
    job_id = await job(redis, dep, 'id -u; id -g; echo "$HOME $USER"')
    run = await finished(redis, dep, job_id)
    assert run.state == "succeeded", run
    lines = (await output(redis, dep, run)).split()
    assert lines == [str(nobody.pw_uid), str(nobody.pw_gid), nobody.pw_dir, "nobody"]


async def test_limits_hold_per_job(node, nursery, redis, dep) -> None:
    sandbox = Sandbox.make(memory="64M", cpu_s=1, nofile=16)
    await start(nursery, redis, dep, sandbox=sandbox)
    python = "python3 -c"
    hog = await job(redis, dep, f"{python} 'x = bytearray(256 * 1024 * 1024)'")
    spin = await job(redis, dep, "while :; do :; done", timeout_s=60)
    files = await job(
        redis, dep, f"{python} 'import os; [os.open(\"/dev/null\", 0) for _ in range(64)]'"
    )
    fine = await job(redis, dep, f"{python} 'x = bytearray(8 * 1024 * 1024); print(len(x))'")
    with trio.fail_after(30):
        hogged = await finished(redis, dep, hog)
        assert hogged.state == "failed" and "MemoryError" in await output(redis, dep, hogged)
        spun = await finished(redis, dep, spin)
        assert spun.state == "failed" and spun.reason in ("signal SIGXCPU", "signal SIGKILL"), spun
        opened = await finished(redis, dep, files)
        assert opened.state == "failed" and "Too many open files" in await output(
            redis, dep, opened
        )
        ok = await finished(redis, dep, fine)
        assert ok.state == "succeeded" and await output(redis, dep, ok) == f"{8 * 1024 * 1024}\n"


async def test_a_handlers_only_pool_runs_no_command(
    node, nursery, redis, dep, tmp_path: Path
) -> None:
    await start(nursery, redis, dep, policy=CommandPolicy.of(True, []))
    marker = tmp_path / "ran"
    abused = await job(redis, dep, f"touch {marker}")
    ping = await job(redis, dep, "handler:sandbox-ping")
    refused = await finished(redis, dep, abused)
    assert refused.state == "failed" and "handlers only" in refused.reason
    assert (await finished(redis, dep, ping)).state == "succeeded"
    assert not marker.exists()


async def test_an_allow_listed_pool_runs_only_matching_commands(
    node, nursery, redis, dep, tmp_path: Path
) -> None:
    await start(nursery, redis, dep, policy=CommandPolicy.of(False, [r"echo [a-z]+"]))
    marker = tmp_path / "ran"
    ok = await job(redis, dep, "echo fine")
    sneaky = await job(redis, dep, f"echo fine; touch {marker}")
    assert (await finished(redis, dep, ok)).state == "succeeded"
    refused = await finished(redis, dep, sneaky)
    assert refused.state == "failed" and "--allow-command" in refused.reason
    assert not marker.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--run-as", "no-such-user-here"], "no user"),
        (["--limit-memory", "lots"], "not a memory size"),
        (["--limit-nofile", "1"], "at least 3"),
        (["--allow-command", "("], "--allow-command"),
    ],
)
def test_bad_sandbox_flags_are_refused_at_start(flags: list[str], message: str) -> None:
    out = subprocess.run(
        shardsched_cmd("worker", "--redis", "redis://127.0.0.1:1/0", *flags),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert out.returncode != 0 and message in out.stderr, out.stderr
