"""The README's five-minute tour, executed: every ```sh tour``` block (as one bash script,
in order) and every ```python tour``` block, against a real node and worker (issue #7)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from conftest import RedisServer, child_env, shardsched_cmd, wait_until
from shardsched.dev import free_port

README = Path(__file__).resolve().parents[1] / "README.md"


def tour_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language} tour\n(.*?)```", README.read_text(), re.DOTALL)


@pytest.fixture
def services(own_redis_server: RedisServer, tmp_path: Path) -> Iterator[str]:
    """A node (default namespace and shard count, HTTP API) and a worker."""
    port = free_port()
    with (tmp_path / "services.log").open("wb") as log:
        procs = [
            subprocess.Popen(
                shardsched_cmd(*args, "--redis", own_redis_server.url),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(),
            )
            for args in (("node", "--http", f"127.0.0.1:{port}"), ("worker",))
        ]
        try:
            yield f"127.0.0.1:{port}"
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=10)


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


async def test_readme_tour(services: str, own_redis_server: RedisServer, tmp_path: Path) -> None:
    async def ready() -> bool:
        async with httpx.AsyncClient() as client:
            try:
                return (await client.get(f"http://{services}/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

    await wait_until(ready, timeout=20, every=0.1)
    shell, python = tour_blocks("sh"), tour_blocks("python")
    assert len(shell) >= 4 and len(python) >= 1, "the README lost its tour"
    env = {
        **child_env(),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "SHARDSCHED_API": f"http://{services}",
    }
    # what dev does on its first start: an admin token in .shardsched/token
    made = await trio.to_thread.run_sync(
        run,
        [
            *shardsched_cmd("tokens", "create", "tour", "--scope", "admin"),
            "--redis",
            own_redis_server.url,
        ],
        tmp_path,
        env,
    )
    assert made.returncode == 0, made.stderr
    (tmp_path / ".shardsched").mkdir()
    (tmp_path / ".shardsched" / "token").write_text(made.stdout)
    script = "set -euo pipefail\n" + "\n".join(shell).replace("localhost:8080", services)
    out = await trio.to_thread.run_sync(run, ["bash", "-c", script], tmp_path, env)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert '"output":"hello from job_' in text
    assert "succeeded" in text and "dst_shifted" in text and "trying things" not in text
    dag_run = text[text.rindex("DAG_RUN_ID") :]
    for task in ("extract", "transform", "load"):
        assert re.search(rf"^{task}\s+succeeded", dag_run, re.MULTILINE), dag_run

    code = "\n".join(python).replace("redis://127.0.0.1:6379/0", own_redis_server.url)
    out = await trio.to_thread.run_sync(run, [sys.executable, "-c", code], tmp_path, env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split("\n")[:2] == ["succeeded", "pong"], out.stdout
