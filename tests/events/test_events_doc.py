"""docs/events.md's worked examples, executed as printed: the job file written where the
page says, every ``$ shardsched …`` run against a real node with a token named ``docs``
(each output line held to the page's, ``<…>`` standing for an id or a time), the SDK
block on both clients, and both signing examples (the shell one with openssl and curl,
the Python one in a fresh interpreter) sent to the hook the page makes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import trio

import doc_blocks
from conftest import admin_token, child_env, shardsched_cmd, wait_until
from doc_blocks import commands
from shardsched.runtime import yaml12
from shardsched.sdk.sync import Client

SECRET = "a-long-shared-secret-for-the-docs"


def blocks(kind: str) -> dict[str, str]:
    return doc_blocks.blocks("events.md", kind)


def matches(printed: str, got: str) -> bool:
    pattern = "".join(
        ".+?" if part.startswith("<") else re.escape(part)
        for part in re.split(r"(<[a-z_]+>)", printed)
    )
    return re.fullmatch(pattern, got) is not None


async def test_the_events_page_runs_as_printed(node, worker, http, redis, dep, tmp_path) -> None:
    token = await admin_token(redis, dep, "docs")
    env = {**child_env(), "SHARDSCHED_API": str(http.base_url).rstrip("/"),
           "SHARDSCHED_TOKEN": token, "CMS_SECRET": SECRET}  # fmt: skip
    for name, text in blocks("yaml").items():
        (tmp_path / name).write_text(text)

    def run(line: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(line)
        assert argv[0] == "shardsched"
        return subprocess.run(shardsched_cmd(*argv[1:]), cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    console = blocks("console")
    for name in ("listen", "hook", "chain"):
        for line, printed in commands(console[name]):
            done = await trio.to_thread.run_sync(run, line)
            assert done.returncode == 0, (line, done.stderr)
            got = done.stdout.rstrip("\n").splitlines()
            assert len(got) == len(printed), (line, got, printed)
            for want, have in zip(printed, got, strict=True):
                assert matches(want, have), (line, want, have)

    def sdk(client: Client) -> str:
        scope = {"client": client}
        exec(blocks("python")["sdk"], scope)
        return scope["event"].outcome.outcome.value

    url = str(http.base_url)
    with Client(url, token=token) as over_http:
        assert await trio.to_thread.run_sync(sdk, over_http) == "runs"
    sh = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            ["bash", "-euo", "pipefail", "-c", blocks("sh")["sign"]],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    )
    assert sh.returncode == 0 and '"outcome":"runs"' in sh.stdout, sh.stdout + sh.stderr
    py = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, "-c", blocks("python")["hook"]],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    )
    assert py.stdout.strip() == "runs", py.stdout + py.stderr
    slugs = []
    page = (await http.get("/api/v1/events/received", params={"name": "cms.published"})).json()
    for event in page["events"]:
        for d in event["outcome"]["deliveries"]:
            if d["result"] == "created":
                slugs.append((await http.get(f"/api/v1/runs/{d['run_id']}")).json()["args"])
    assert sorted(s["slug"] for s in slugs) == ["from-python", "from-the-cms", "hello", "hi"]

    async def loaded() -> list | None:
        runs = (await http.get("/api/v1/jobs/load/runs")).json()["runs"]
        return runs if runs and runs[0]["state"] == "succeeded" else None

    (load,) = await wait_until(loaded, timeout=30)
    (transform,) = (await http.get("/api/v1/jobs/transform/runs")).json()["runs"]
    (extract,) = (await http.get("/api/v1/jobs/extract/runs")).json()["runs"]
    assert transform["cause"] == f"after:{extract['run_id']}"
    assert load["cause"] == f"after:{transform['run_id']}"
    backup = yaml12.load(blocks("yaml")["backup.yaml"])
    made = await http.post("/api/v1/jobs", json=backup)
    assert made.status_code == 201, made.text
    job = (await http.get(f"/api/v1/jobs/{made.json()['job_id']}")).json()
    assert job["backlog"] == {"policy": "coalesce", "max_queued": 1}
