"""A job cannot end its worker or climb out of its sandbox: a NUL byte is a 422 naming the
field (and, stored before that check, fails its run instead of killing every worker that
claims it); loader and shell-startup variables are refused; and the sandbox's root helpers
never see the job's environment, so a preloaded library never runs as uid 0."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import trio

from conftest import wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import ExecSpec, JobSpec, OnceSchedule
from shardsched.ops import listing
from shardsched.store.drive import drive_async
from shardsched.store.lua.runs import Delivery
from shardsched.worker.execution import Executor
from shardsched.worker.holdings import Claimed
from shardsched.worker.sandbox import Sandbox
from shardsched.worker.worker import Worker

JOB = {"name": "h", "schedule": {"type": "interval", "every_s": 3600}, "command": "true"}


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"command": "echo a\u0000b"}, "$.command", "NUL"),
        ({"env": {"GOOD": "x", "BAD": "a\u0000b"}}, "$.env.BAD", "NUL"),
        ({"env": {"LD_PRELOAD": "/tmp/x.so"}}, "$.env.LD_PRELOAD", "loader"),
        ({"env": {"LD_LIBRARY_PATH": "/tmp"}}, "$.env.LD_LIBRARY_PATH", "loader"),
        ({"env": {"BASH_ENV": "/tmp/rc"}}, "$.env.BASH_ENV", "loader"),
        ({"env": {"IFS": "x"}}, "$.env.IFS", "loader"),
        ({"env": {"PYTHONSTARTUP": "/tmp/s.py"}}, "$.env.PYTHONSTARTUP", "loader"),
        ({"env": {"GCONV_PATH": "/tmp"}}, "$.env.GCONV_PATH", "loader"),
        ({"env": {"NODE_OPTIONS": "-r x"}}, "$.env.NODE_OPTIONS", "loader"),
        ({"env": {"PERL5OPT": "-Mx"}}, "$.env.PERL5OPT", "loader"),
    ],
)
async def test_hostile_bytes_and_loader_variables_are_a_422_naming_the_field(
    http, fields, field, says
) -> None:
    before = (await http.get("/api/v1/jobs")).json()
    reply = await http.post("/api/v1/jobs", json={**JOB, **fields})
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["details"]["field"] == field, error
    assert says in error["message"], error
    assert (await http.get("/api/v1/jobs")).json() == before  # nothing was written
    # a DAG task's env and an update go through the same rules
    dag = {"name": "d", "schedule": JOB["schedule"], "tasks": [{"name": "t", **JOB, **fields}]}
    dag["tasks"][0].pop("schedule")
    assert (await http.post("/api/v1/dags", json=dag)).status_code == 422


async def test_names_that_only_look_alike_are_allowed(http) -> None:
    env = {"LDX": "1", "ENVIRONMENT": "prod", "IFS_MODE": "a", "MY_PYTHONPATH": "/x"}
    reply = await http.post("/api/v1/jobs", json={**JOB, "env": env})
    assert reply.status_code == 201, reply.text


async def test_a_nul_stored_before_the_check_fails_its_run_and_spares_the_worker(
    node, redis, dep, nursery
) -> None:
    spec = JobSpec(name="n", schedule=OnceSchedule(at=from_ms(10**13)), command="true")
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    raw = msgspec.json.encode(msgspec.structs.replace(spec, command="echo a\x00b"))
    await redis.execute("HSET", dep.keys_for(job_id).job(job_id), "spec", raw)
    now = JobSpec(name="g", schedule=OnceSchedule(at=from_ms(0)), command="true")
    good = await drive_async(ops.create_job(dep, now), redis)
    worker = Worker(redis, dep, "nul-survivor", concurrency=2)
    await nursery.start(worker.run)
    await drive_async(ops.trigger(dep, job_id), redis)

    async def ended(jid: str, state: str):
        runs = (await drive_async(listing.runs_page(dep, jid, 5), redis)).runs
        return next((r for r in runs if r.state in ("failed", "dead_letter", "succeeded")), None)

    bad_run = await wait_until(lambda: ended(job_id, "failed"), timeout=20)
    assert bad_run.state in ("failed", "dead_letter"), bad_run
    assert "null byte" in (bad_run.reason or ""), bad_run
    good_run = await wait_until(lambda: ended(good.job_id, "succeeded"), timeout=20)
    assert good_run.state == "succeeded"  # the same worker is still at work


PRELOAD = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void hit(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/hit-%d", DIR, (int)getpid());
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
}
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the job's user can write (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="shardsched-preload-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def claimed(command: str, env: dict[str, str]) -> Claimed:
    spec = ExecSpec(command=command, timeout_s=60, env=env)
    return Claimed(0, Delivery("0-1", "j:1:1", "t"), spec, 0, 1, 0, trio.current_time())


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as needs root")
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (scripts/setup.sh)")
async def test_a_library_built_by_one_job_and_preloaded_by_another_never_runs_as_root(
    shared_dir: Path,
) -> None:
    nobody = pwd.getpwnam("nobody")
    (shared_dir / "lib.c").write_text(PRELOAD)
    # Every sandbox: the user drop alone, and with limits (prlimit runs as root first).
    for sandbox in (Sandbox.make(run_as="nobody"), Sandbox.make(run_as="nobody", nofile=64)):
        executor = Executor(sandbox=sandbox)
        d = shared_dir
        build = f"cc -shared -fPIC -DDIR='\"{d}\"' -o {d}/lib.so {d}/lib.c"
        built = await executor.run(claimed(build, {}))
        assert built.succeeded, built
        assert (shared_dir / "lib.so").stat().st_uid == nobody.pw_uid  # built by the job
        env = {"LD_PRELOAD": f"{shared_dir}/lib.so"}  # stored before the API's check
        ran = await executor.run(claimed("true", env))
        assert ran.succeeded, ran
        owners = {p.stat().st_uid for p in shared_dir.glob("hit-*")}
        assert owners, "the library never loaded: the test proves nothing"
        assert owners == {nobody.pw_uid}, f"the preloaded library ran as uid {owners}"
        for p in shared_dir.glob("hit-*"):
            p.unlink()
        (shared_dir / "lib.so").unlink()
