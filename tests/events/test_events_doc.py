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
from pathlib import Path

import trio

from conftest import admin_token, child_env, shardsched_cmd
from shardsched.sdk.sync import Client

PAGE = Path(__file__).resolve().parents[2] / "docs" / "events.md"
SECRET = "a-long-shared-secret-for-the-docs"


def blocks(kind: str) -> dict[str, str]:
    text = PAGE.read_text()
    return {
        m.group(1).strip(): m.group(2)
        for m in re.finditer(rf"```{kind} ([^\n]*)\n(.*?)```", text, re.DOTALL)
    }


def commands(block: str) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return out


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
    (tmp_path / "reindex.yaml").write_text(blocks("yaml")["reindex.yaml"])

    def run(line: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(line)
        assert argv[0] == "shardsched"
        return subprocess.run(shardsched_cmd(*argv[1:]), cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    console = blocks("console")
    for name in ("listen", "hook"):
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
