"""What a worker lets a job do, on real processes: the job's own env map, --run-as,
per-job memory, CPU-time and open-file limits, and restricted pools (handlers only, or
allowed commands only) that run nothing else even if the API is abused."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.core.errors import ConfigError
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
    w = Worker(redis, dep, "sandboxed", **{"concurrency": 4, **options})
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


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every uid may write (its parents traversable): where jobs under
    different uids leave what they saw."""
    d = Path(tempfile.mkdtemp(prefix="shardsched-uids-", dir="/tmp"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


#: A uid range per test: the suite runs tests side by side, and a uid is the machine's, so
#: two tests on one range see (and kill) each other's runs.
UIDS = "210000-210007"
BOMB_UIDS = "210100-210107"


def processes() -> list[tuple[int, int, str]]:
    """(pid, real uid, state letter) of every process, from /proc (no ps needed)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = dict(
                line.split(":", 1) for line in (entry / "status").read_text().splitlines()
            )
        except (OSError, ValueError):
            continue
        out.append((int(entry.name), int(fields["Uid"].split()[0]), fields["State"].split()[0]))
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
async def test_each_run_has_a_uid_of_its_own_and_cannot_reach_another(
    node, nursery, redis, dep, shared_dir: Path
) -> None:
    """The attack as reported: under a shared ``--run-as`` uid a job read another team's
    running job's secret from /proc/<pid>/environ, and could signal it. With
    ``--run-as-uids`` each run is a uid of its own: denied both; and whatever a run leaves
    running is killed when it ends, before its uid serves another run."""
    await start(nursery, redis, dep, sandbox=Sandbox.make(run_as_uids=UIDS, concurrency=4))
    d = shared_dir
    victim = await job(
        redis, dep, f"id -u > {d}/b.uid; echo $$ > {d}/b.pid.tmp; mv {d}/b.pid.tmp {d}/b.pid; "
        f"while [ ! -e {d}/a.done ]; do sleep 0.1; done",
        env={"SECRET_TOKEN": "team-b-secret"}, timeout_s=30,
    )  # fmt: skip
    attacker = await job(
        redis, dep, f"while [ ! -e {d}/b.pid ]; do sleep 0.1; done; p=$(cat {d}/b.pid); id -u; "
        f"if cat /proc/$p/environ > {d}/a.environ 2>/dev/null; then echo read; "
        f"else echo environ-denied; fi; "
        f"if kill -0 $p 2>/dev/null; then echo signalled; else echo kill-denied; fi; "
        f"touch {d}/a.done",
        timeout_s=30,
    )  # fmt: skip
    # a daemon in a session of its own: the run's process group does not reach it
    leaves = await job(redis, dep, "id -u; setsid -f sleep 300")
    a_run = await finished(redis, dep, attacker, timeout=30)
    b_run = await finished(redis, dep, victim, timeout=30)
    assert a_run.state == "succeeded" and b_run.state == "succeeded", (a_run, b_run)
    a_uid, *seen = (await output(redis, dep, a_run)).split()
    b_uid = (d / "b.uid").read_text().strip()
    assert a_uid != b_uid and {int(a_uid), int(b_uid)} <= set(range(210000, 210008))
    assert seen == ["environ-denied", "kill-denied"], seen
    assert "team-b-secret" not in (d / "a.environ").read_text(errors="replace")
    c_run = await finished(redis, dep, leaves)
    c_uid = (await output(redis, dep, c_run)).split()[0]
    alive = [p for p, uid, state in processes() if uid == int(c_uid) and state != "Z"]
    assert not alive, f"processes of a finished run's uid {c_uid}: {alive}"  # (zombies: dead)


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
async def test_limit_nproc_holds_per_run(node, nursery, redis, dep) -> None:
    """A fork bomb under ``--limit-nproc`` stops at the limit; with ``--run-as-uids`` the
    kernel counts per run, so two runs at once each get their own allowance."""
    sandbox = Sandbox.make(run_as_uids=BOMB_UIDS, nproc=8, concurrency=4)
    await start(nursery, redis, dep, sandbox=sandbox)
    bomb = (
        "python3 -c 'import os, time\nok = 0\nfor _ in range(40):\n    try:\n"
        "        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n"
        "        time.sleep(3)\n        os._exit(0)\n    ok += 1\nprint(ok)'"
    )
    runs = [await job(redis, dep, bomb, timeout_s=30) for _ in range(2)]
    forked = []
    for job_id in runs:
        run = await finished(redis, dep, job_id, timeout=30)
        assert run.state == "succeeded", run
        forked.append(int((await output(redis, dep, run)).strip()))
    assert all(3 <= n < 8 for n in forked), forked  # each its own 8, less the job itself


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
async def test_a_uid_whose_processes_linger_is_not_given_to_the_next_run(
    node, nursery, redis, dep
) -> None:
    """A run's killed children wait as zombies until init reaps them (a second or more on
    some machines), still counted against --limit-nproc: the next run given that uid
    could not fork ("Cannot fork", 4 tries in 6). A uid is taken only once no process,
    zombie or not, has it. Here eight processes hold the first uid of the range, as a
    filled run's zombies would, and the run goes to the other."""
    holders = [
        subprocess.Popen(["setpriv", "--reuid=211000", "--regid=211000", "--clear-groups",
                          "--", "sleep", "60"])
        for _ in range(8)
    ]  # fmt: skip
    try:
        sandbox = Sandbox.make(run_as_uids="211000-211001", nproc=8, concurrency=1)
        await start(nursery, redis, dep, sandbox=sandbox, concurrency=1)
        forks = await job(redis, dep, "id -u; sleep 0.1 & wait; echo forked")
        run = await finished(redis, dep, forks)
        assert run.state == "succeeded", (run, await output(redis, dep, run))
        assert (await output(redis, dep, run)).split() == ["211001", "forked"]
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


def test_run_as_uids_is_checked_at_start() -> None:
    for text, message in (("5-1", "non-empty"), ("abc", "FIRST-LAST"), ("0-10", "within")):
        with pytest.raises(ConfigError, match=message):
            Sandbox.make(run_as_uids=text)
    with pytest.raises(ConfigError, match="for --concurrency 16"):
        Sandbox.make(run_as_uids="210000-210003", concurrency=16)
    with pytest.raises(ConfigError, match="exclude"):
        Sandbox.make(run_as="nobody", run_as_uids=UIDS)


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
