"""docs/apps.md's worked example, executed as a user runs it: the app's module written
where the page says, every ``$ shardsched …`` of its console blocks run in that directory
against a real node (through the API, with a token), each one's output held to the
page's, then the state checked through the Redis SDK (paused still, history kept,
pruned deleted), and the test-kit block run in a fresh interpreter. Also a CLI user's
mistakes: a module that is not there, an attribute that is not an App, a declaration
the service refuses."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import trio

import doc_blocks
from conftest import child_env, shardsched_cmd
from doc_blocks import commands
from shardsched.core.models import JobStatus
from shardsched.sdk.sync import Client


def blocks(kind: str) -> dict[str, str]:
    return doc_blocks.blocks("apps.md", kind)


def run_in(cwd: Path, env: dict[str, str], line: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    assert argv[0] == "shardsched"
    return subprocess.run(
        shardsched_cmd(*argv[1:]), cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


async def test_the_apps_page_runs_as_printed(node, http, redis_server, namespace, tmp_path):
    python, console = blocks("python"), blocks("console")
    (tmp_path / "billing").mkdir()
    (tmp_path / "billing" / "__init__.py").write_text("")
    module = tmp_path / "billing" / "jobs.py"
    env = {
        **child_env(),
        "SHARDSCHED_API": str(http.base_url),
        "SHARDSCHED_TOKEN": http.headers["authorization"].removeprefix("Bearer "),
    }

    def session(block: str) -> None:
        for line, printed in commands(block):
            out = run_in(tmp_path, env, line)
            assert out.returncode == 0, (line, out.stderr)
            assert out.stdout.splitlines() == printed, (line, out.stdout)

    module.write_text(python["billing/jobs.py"])
    await trio.to_thread.run_sync(session, console["deploy"])
    module.write_text(python["billing/jobs.py (the next release)"])
    await trio.to_thread.run_sync(session, console["redeploy"])

    def state() -> None:
        with Client(redis_server.url, namespace=namespace) as c:
            nightly = c.get_job("nightly_invoices")
            assert nightly.status == JobStatus.PAUSED, "a deploy never resumes"
            assert nightly.pause_reason == "card processor outage"
            assert [v.version for v in c.job_versions("nightly_invoices").versions] == [1, 2, 3]
            assert c.get_job("sync_payments").status == JobStatus.DELETED
            changes = c.job_changes("nightly_invoices").changes
            assert {ch.by for ch in changes} == {"test-admin"}, "the token's name is 'by'"
            assert [t.name for t in c.get_dag("dag_ledger").tasks] == [
                "extract", "transform", "load"
            ]  # fmt: skip

    await trio.to_thread.run_sync(state)

    def kit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", python["test"]],
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = await trio.to_thread.run_sync(kit)
    assert out.returncode == 0, out.stderr
    assert out.stdout == blocks("text")["test"]


async def test_deploy_says_what_is_wrong_and_writes_nothing(node, http, tmp_path) -> None:
    env = {
        **child_env(),
        "SHARDSCHED_API": str(http.base_url),
        "SHARDSCHED_TOKEN": http.headers["authorization"].removeprefix("Bearer "),
    }
    (tmp_path / "bad_cron.py").write_text(
        "import shardsched\napp = shardsched.App('bad')\n"
        "@app.job(cron='61 * * * *')\ndef f(ctx): ...\n"
    )
    (tmp_path / "two.py").write_text(
        "import shardsched\na = shardsched.App('a')\nb = shardsched.App('b')\n"
    )
    (tmp_path / "empty.py").write_text("import shardsched\napp = shardsched.App('empty')\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "taken.py").write_text(
        "import shardsched\napp = shardsched.App('taken')\n"
        "@app.job(id='by-hand', every=60)\ndef f(ctx): ...\n"
    )

    def run(line: str) -> subprocess.CompletedProcess[str]:
        return run_in(tmp_path, env, line)

    hand = await trio.to_thread.run_sync(
        run, "shardsched jobs create by-hand --id by-hand --every 1m --command true"
    )
    assert hand.returncode == 0, hand.stderr
    cases = {
        "shardsched deploy nowhere:app": "cannot import nowhere",
        "shardsched deploy two": "holds 2 shardsched.App objects",
        "shardsched deploy two:c": "c is nothing, not a shardsched.App",
        "shardsched deploy bad_cron:app": "job 'f': minute field",
        "shardsched deploy taken:app": "'by-hand' exists and belongs to no app",
        "shardsched deploy empty:app": "declares no job or DAG",
        "shardsched deploy exits:app": "cannot import exits: SystemExit",
    }
    for line, said in cases.items():
        out = await trio.to_thread.run_sync(run, line)
        assert out.returncode != 0 and said in out.stderr, (line, out.stderr)
        assert "Traceback" not in out.stderr
    listed = await trio.to_thread.run_sync(run, "shardsched jobs list --json")
    assert [j["job_id"] for j in __import__("json").loads(listed.stdout)["jobs"]] == ["by-hand"]


async def test_apply_leaves_an_apps_own_alone(node, http, tmp_path) -> None:
    """Found by the independent tester: ``apply --set app:billing --prune`` deleted an
    app's jobs, and a plain apply took one over (then the app could not deploy)."""
    env = {
        **child_env(),
        "SHARDSCHED_API": str(http.base_url),
        "SHARDSCHED_TOKEN": http.headers["authorization"].removeprefix("Bearer "),
    }
    (tmp_path / "mine.py").write_text(
        "import shardsched\napp = shardsched.App('mine')\n@app.job(every=60)\ndef tick(ctx): ...\n"
    )
    (tmp_path / "over.yaml").write_text(
        "kind: job\nid: tick\nname: tick\ncommand: 'true'\n"
        "schedule: {type: interval, every_s: 30}\n"
    )

    def run(line: str) -> subprocess.CompletedProcess[str]:
        return run_in(tmp_path, env, line)

    assert (await trio.to_thread.run_sync(run, "shardsched deploy mine:app")).returncode == 0
    for line, said in {
        "shardsched apply -f over.yaml --set app:mine --prune": "belong to apps declared in code",
        "shardsched apply -f over.yaml": "job tick belongs to app 'mine'",
    }.items():
        out = await trio.to_thread.run_sync(run, line)
        assert out.returncode != 0 and said in out.stderr, (line, out.stderr)
    again = await trio.to_thread.run_sync(run, "shardsched deploy mine:app")
    assert again.returncode == 0 and "unchanged job tick" in again.stdout, again
