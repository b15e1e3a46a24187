"""The five-minute tour (docs/tour.md), executed: every ```sh tour``` block (as one bash script,
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

from conftest import child_env, shardsched_cmd, wait_until
from shardsched.runtime.redis_server import free_port

TOUR = Path(__file__).resolve().parents[2] / "docs" / "tour.md"


def tour_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language} tour\n(.*?)```", TOUR.read_text(), re.DOTALL)


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[str]:
    """``shardsched dev`` as a user starts it, in the tour's directory (its data dir is
    ``.shardsched`` there), on a free port instead of 8080; returns the API's URL."""
    port = free_port()
    log = (tmp_path / "dev.log").open("wb")
    proc = subprocess.Popen(
        shardsched_cmd("dev", "--http", f"127.0.0.1:{port}"),
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=child_env(),
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # ~12 s; CI runs the slow step too
async def test_the_tour(dev: str, tmp_path: Path) -> None:
    """Every block exactly as printed: the only thing told is where dev's API is
    (SHARDSCHED_API, which the tour's first block reads)."""

    async def ready() -> bool:
        async with httpx.AsyncClient() as client:
            try:
                return (await client.get(f"{dev}/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

    await wait_until(ready, timeout=30)
    shell, python = tour_blocks("sh"), tour_blocks("python")
    assert len(shell) >= 4 and len(python) >= 1, "docs/tour.md lost its tour"
    # as a user's checkout: a .venv beside .shardsched, and nothing of it on PATH until
    # the tour's first block activates it
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    env = {**child_env(), "PATH": path, "SHARDSCHED_API": dev}
    script = "set -euo pipefail\n" + "\n".join(shell)
    out = await trio.to_thread.run_sync(run, ["bash", "-c", script], tmp_path, env)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert '"output":"hello from job_' in text
    assert "succeeded" in text and "dst_shifted" in text and "trying things" not in text
    # the export applied back: nothing but unchanged
    assert re.search(r"^\(dry run: nothing written\) \d+ unchanged$", text, re.MULTILINE)
    dag_run = text[text.rindex("DAG_RUN_ID") :]
    for task in ("extract", "transform", "load"):
        assert re.search(rf"^{task}\s+succeeded", dag_run, re.MULTILINE), dag_run

    code = "\n".join(python)
    python_in_venv = str(tmp_path / ".venv" / "bin" / "python")  # the tour's `python`
    out = await trio.to_thread.run_sync(run, [python_in_venv, "-c", code], tmp_path, env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split("\n")[:2] == ["succeeded", "pong"], out.stdout
