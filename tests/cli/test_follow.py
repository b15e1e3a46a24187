"""Waiting and following (issue #17): a running job's output is written while it runs and
streamed over SSE; `runs output --follow`, `runs wait`, `jobs trigger --wait` (exit with
the job's exit code), `dags trigger --watch`, and `--timeout`."""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import trio

from conftest import child_env, cli, shardsched_cmd, wait_until
from shardsched.store.drive import call_script
from shardsched.store.lua import runs as lua

FAR = {"type": "once", "at": "2099-01-01T00:00:00Z"}


async def create(http, command: str, **fields) -> str:
    body = {"name": "f", "command": command, "schedule": FAR, **fields}
    reply = await http.post("/api/v1/jobs", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def sse_events(http: httpx.AsyncClient, path: str) -> list[tuple[str, dict]]:
    out, event = [], "message"
    async with http.stream("GET", path, timeout=30) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        async for line in reply.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                out.append((event, json.loads(line[5:])))  # the server ends after "end"
    return out


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_output_is_written_while_the_job_runs_and_streamed(
    node, worker, http, redis, dep
) -> None:
    job = await create(http, "echo one; sleep 2.5; echo two; sleep 2.5; echo three")
    rid = (await http.post(f"/api/v1/jobs/{job}/trigger")).json()["run_id"]

    async def partial() -> dict | None:
        out = (await http.get(f"/api/v1/runs/{rid}/output")).json()
        return out if out["state"] == "running" and out["output"] else None

    early = await wait_until(partial, timeout=10)
    assert early["output"].startswith("one\n") and "three" not in early["output"]
    assert early["total_bytes"] == len(early["output"])
    events = await sse_events(http, f"/api/v1/runs/{rid}/output/stream")
    text = "".join(d["text"] for e, d in events if e == "output")
    assert text == "one\ntwo\nthree\n"
    offsets = [d["offset"] for e, d in events if e == "output"]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert events[-1] == ("end", {"state": "succeeded", "exit_code": 0, "reason": None})
    final = (await http.get(f"/api/v1/runs/{rid}/output")).json()
    assert final["output"] == "one\ntwo\nthree\n" and final["total_bytes"] == 14
    assert (await http.get("/api/v1/runs/nope:1:1/output/stream")).status_code == 404

    # a worker that does not hold the run cannot write its output
    sk = dep.keys_for(rid)
    before = await redis.execute("GET", sk.output(rid))
    stale = lua.OutputChunk(lua.Delivery("0-1", rid, 99), 5, False, b"forged")
    (code,) = await call_script(redis, lua.flush_output(sk, "test-worker", [stale]))
    assert code == -2 and await redis.execute("GET", sk.output(rid)) == before


async def test_a_follower_behind_the_kept_tail_is_told_what_it_missed(node, worker, http) -> None:
    job = await create(http, "head -c 200000 /dev/zero | tr '\\0' x; sleep 3; echo end")
    rid = (await http.post(f"/api/v1/jobs/{job}/trigger")).json()["run_id"]
    events = await sse_events(http, f"/api/v1/runs/{rid}/output/stream")
    skipped = [d["skipped"] for e, d in events if e == "output" and "skipped" in d]
    text = "".join(d.get("text", "") for e, d in events if e == "output")
    assert skipped and skipped[0] + len(text) == 200004, (skipped, len(text))
    assert text.endswith("xend\n")


async def test_wait_follow_and_watch_from_the_cli(node, worker, http, tmp_path: Path) -> None:
    api = ("--api", str(http.base_url))
    ok = await create(http, "echo hello")
    out = await cli(http, "jobs", "trigger", ok, "--wait", *api)
    assert out.returncode == 0, out.stderr
    assert "succeeded" in out.stdout and out.stderr.startswith("triggered ")
    bad = await create(http, "echo oops; exit 7")
    out = await cli(http, "jobs", "trigger", bad, "--follow", *api)
    assert out.returncode == 7 and out.stdout.startswith("oops\n"), out
    # through a retry: the first attempt fails, the second succeeds
    flag = tmp_path / "flag"
    flaky = await create(
        http,
        f"if [ -f {flag} ]; then echo second; else touch {flag}; exit 3; fi",
        retry_policy={"max_attempts": 2, "base_s": 0, "jitter": False},
    )
    rid = (await http.post(f"/api/v1/jobs/{flaky}/trigger")).json()["run_id"]
    out = await cli(http, "runs", "wait", rid, *api, "--json")
    assert out.returncode == 0, out.stderr
    final = json.loads(out.stdout)
    assert final["attempt"] == 2 and final["state"] == "succeeded"
    assert "retrying as" in out.stderr
    first = (await http.get(f"/api/v1/runs/{rid}")).json()
    assert first["next_run_id"] == final["run_id"] and first["lease_expires_at"] is None
    # a wait that runs out
    slow = await create(http, "sleep 5")
    out = await cli(http, "jobs", "trigger", slow, "--wait", "--timeout", "1s", *api)
    assert out.returncode == 124 and "still" in out.stderr, out
    out = await cli(http, "runs", "output", "nope:1:1", "--follow", *api)
    assert out.returncode == 1 and "not_found" in out.stderr

    dag = {
        "name": "w",
        "schedule": FAR,
        "tasks": [
            {"name": "extract", "command": "true"},
            {"name": "load", "command": "true", "depends_on": ["extract"]},
        ],
    }
    dag_id = (await http.post("/api/v1/dags", json=dag)).json()["dag_id"]
    out = await cli(http, "dags", "trigger", dag_id, "--watch", *api)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.split()[1:] == ["load", "succeeded"] for line in lines), lines
    assert lines[-1].split() == [lines[-1].split()[0], "succeeded"]


@pytest.mark.slow
@pytest.mark.timeout(400)
async def test_follow_a_three_minute_job_live_to_its_outcome(node, worker, http) -> None:
    """The stream is not cut by any read deadline (it used to end at exactly 10 s): a
    follower of a job of three minutes, silent for 20 s at a time (past the server's read
    timeout, and the 15 s keep-alive), prints each line as it comes and exits with the
    job's own status."""
    job = await create(
        http, "for i in 1 2 3 4 5 6 7 8 9; do echo line $i; sleep 20; done; exit 5",
        timeout_s=400,
    )  # fmt: skip
    token = http.headers["authorization"].removeprefix("Bearer ")
    argv = shardsched_cmd("jobs", "trigger", job, "--follow", "--api", str(http.base_url))
    env = {**child_env(), "SHARDSCHED_TOKEN": token}
    arrivals: list[tuple[float, str]] = []

    def follow() -> int:
        started = time.monotonic()
        with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                arrivals.append((time.monotonic() - started, line.rstrip("\n")))
            return proc.wait(timeout=30)

    code = await trio.to_thread.run_sync(follow)
    assert code == 5, arrivals
    printed, summary = arrivals[:9], " ".join(text for _, text in arrivals[9:])
    assert [text for _, text in printed] == [f"line {i}" for i in range(1, 10)], arrivals
    assert "failed" in summary, summary  # then the run, as `runs get` shows it
    times = [t for t, _ in printed]
    assert times[-1] - times[0] > 150, times  # they came as printed, not all at the end
    assert all(b - a > 10 for a, b in itertools.pairwise(times)), times
