"""docs/sdk.md's worked example, executed: every ```python sdk``` block, as a user runs it
(a fresh interpreter, the API and token in the environment), against a real node and
worker through the HTTP API."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import trio

from conftest import child_env

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


async def test_the_sdk_page_runs_as_printed(node, worker, http, tmp_path) -> None:
    blocks = re.findall(r"```python sdk\n(.*?)```", PAGE.read_text(), re.DOTALL)
    assert blocks, "docs/sdk.md lost its worked example"
    env = {
        **child_env(),
        "SHARDSCHED_API": str(http.base_url),
        "SHARDSCHED_TOKEN": http.headers["authorization"].removeprefix("Bearer "),
    }

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "\n".join(blocks)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = await trio.to_thread.run_sync(run)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "succeeded",
        "pong",
        "test-admin",
        "['sdk-ping']",
        "not found: job_000000000000",
    ], out.stdout
