"""Progress bars on long operations (issue #17): drawn on a terminal (here a pty), never
into a pipe, and the command's own output is the same either way."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import trio

from conftest import child_env, cli, shardsched_cmd

HOURLY = {"type": "interval", "every_s": 3600}


def on_a_terminal(args: list[str], env: dict[str, str], timeout: float = 60) -> str:
    """Run with stdout and stderr on a pty (as in a terminal); everything it drew."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the pty
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(leader)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


async def test_bars_on_a_terminal_only(node, worker, http, tmp_path: Path) -> None:
    token = http.headers["authorization"].removeprefix("Bearer ")
    env = {**child_env(), "SHARDSCHED_TOKEN": token, "COLUMNS": "100"}
    api = ["--api", str(http.base_url)]
    many = [{"name": f"bulk-{i}", "command": "true", "schedule": HOURLY} for i in range(30)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps(many))
    drawn = await trio.to_thread.run_sync(
        on_a_terminal, [*shardsched_cmd("jobs", "add", str(path), *api)], env
    )
    assert "adding" in drawn and drawn.count("next run") == 30, drawn[-500:]
    piped = await cli(http, "jobs", "add", str(path), *api)
    assert "adding" not in piped.stdout + piped.stderr and piped.stdout.count("next run") == 30

    docs = "\n---\n".join(
        f"kind: job\nid: p-{i}\nname: p-{i}\ncommand: 'true'\n"
        "schedule: {type: interval, every_s: 60}"
        for i in range(25)
    )
    (tmp_path / "jobs.yaml").write_text(docs)
    drawn = await trio.to_thread.run_sync(
        on_a_terminal, [*shardsched_cmd("apply", "-f", str(tmp_path / "jobs.yaml"), *api)], env
    )
    assert "applying" in drawn and "25 created" in drawn, drawn[-500:]
    assert "comparing with what is there" in drawn, drawn[-500:]  # a GET each, first
    piped = await cli(http, "apply", "-f", str(tmp_path / "jobs.yaml"), *api)
    assert "applying" not in piped.stderr and "25 unchanged" in piped.stdout

    # export counts as it reads pages (how many there are is not known before)
    target = str(tmp_path / "exported")
    drawn = await trio.to_thread.run_sync(
        on_a_terminal, [*shardsched_cmd("export", "--dir", target, *api)], env
    )
    assert "exporting" in drawn and "85 written" in drawn, drawn[-500:]


async def test_backfill_wait_returns_once_every_tick_has_run(node, worker, http, redis) -> None:
    from datetime import timedelta

    from shardsched.core.instants import from_ms

    now = await redis.time_ms()
    start = from_ms(now - 6000)
    body = {
        "name": "bf-wait",
        "command": "sleep 0.3",
        "schedule": {"type": "interval", "every_s": 1, "start_at": start.isoformat()},
        "catchup": "none",
        "misfire_grace_s": 0,
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    since, until = start.isoformat(), (start + timedelta(seconds=3)).isoformat()
    out = await cli(
        http,
        "jobs",
        "backfill",
        job_id,
        "--since",
        since,
        "--until",
        until,
        "--wait",
        "--api",
        str(http.base_url),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("4 ticks: 4 queued")
    params = {"since": since, "until": until}
    runs = (await http.get(f"/api/v1/jobs/{job_id}/runs", params=params)).json()["runs"]
    assert len(runs) == 4 and {r["state"] for r in runs} == {"succeeded"}
