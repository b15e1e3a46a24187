"""``shardsched dev`` end to end, as a user runs it: start, use over HTTP, SIGTERM, nothing left."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from conftest import child_env, shardsched_cmd
from shardsched.dev import free_port


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("cluster", [0, 3], ids=["one-redis", "cluster-3"])
def test_dev_runs_a_job_and_stops_everything_on_sigterm(tmp_path: Path, cluster: int) -> None:
    port = free_port()
    extra = ["--cluster", str(cluster)] if cluster else []
    proc = subprocess.Popen(
        shardsched_cmd(
            "dev", "--http", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), *extra
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=child_env(),
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or "ready" not in lines[-1]:
            lines.append(proc.stdout.readline())
            assert lines[-1], f"dev exited: {lines}"
        line = lines[-1]
        assert "ready" in line and f"http://127.0.0.1:{port}/api/v1" in line, line
        assert ("redis+cluster://" in line) == bool(cluster), line
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as http:
            body = {
                "name": "dev-e2e",
                "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
                "command": "echo dev says hi",
            }
            resp = http.post("/api/v1/jobs", json=body)
            assert resp.status_code == 201, resp.text
            job_id = resp.json()["job_id"]
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                runs = http.get(f"/api/v1/jobs/{job_id}/runs").json()["runs"]
                if runs and runs[0]["state"] == "succeeded":
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"run did not succeed: {runs}")
            out = http.get(f"/api/v1/runs/{runs[0]['run_id']}/output").json()["output"]
            assert out == "dev says hi\n"
            assert http.get("/readyz").status_code == 200
        tree = descendants(proc.pid)
        assert len(tree) >= 1 + max(cluster, 1), "expected the embedded redis-server(s), a worker"
        aof = list((tmp_path / "data").rglob("appendonlydir"))
        assert len(aof) == max(cluster, 1), "AOF is on in the data dir, on every node"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        survivors = [pid for pid in tree if alive(pid)]
        assert survivors == [], f"left behind: {survivors}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
