"""The CLI says how things ended (issue #50): ``jobs list`` has a last outcome and a
``--health failing`` filter, ``jobs get`` the last run, ``jobs ticks`` each tick with how
its run ended, ``runs failed`` and ``dead-letter`` name the job and the reason, and ``runs
list`` with no arguments lists every run under way with its job and worker."""

from __future__ import annotations

import signal

import trio

from conftest import child_env, cli, shardsched_cmd, wait_until
from waits import start_logged


async def test_the_cli_shows_outcomes_names_and_reasons(node, worker, http) -> None:
    api = ("--api", str(http.base_url))
    once = {"type": "once", "at": "2020-01-01T00:00:00Z"}
    bodies = [
        {"name": "breaks", "command": "echo no disk; exit 4", "schedule": once},
        {"name": "dies", "command": "exit 5", "schedule": once,
         "retry_policy": {"max_attempts": 2, "base_s": 0, "jitter": False}},
        {"name": "fine", "command": "true", "schedule": once},
        {"name": "slow", "command": "sleep 30", "schedule": once},
    ]  # fmt: skip
    ids = {b["name"]: (await http.post("/api/v1/jobs", json=b)).json()["job_id"] for b in bodies}

    async def settled() -> bool:
        states = {}
        for name, job_id in ids.items():
            runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
            states[name] = runs[0]["state"] if runs else None
        return states == {"breaks": "failed", "dies": "dead_letter", "fine": "succeeded",
                          "slow": "running"}  # fmt: skip

    await wait_until(settled, timeout=30)

    listed = await cli(http, "jobs", "list", *api)
    assert listed.returncode == 0, listed.stderr
    line = {ln.split()[1]: ln for ln in listed.stdout.splitlines()[1:] if ln.strip()}
    assert "LAST" in listed.stdout.splitlines()[0]
    assert " failed (" in line["breaks"] and " succeeded (" in line["fine"]
    failing = await cli(http, "jobs", "list", "--health", "failing", *api)
    names = {ln.split()[1] for ln in failing.stdout.splitlines()[1:] if ln.strip()}
    assert names == {"breaks", "dies"}, failing.stdout

    got = await cli(http, "jobs", "get", "breaks", *api)
    assert f"{ids['breaks']}:" in got.stdout and "last_run" in got.stdout
    assert "failed" in got.stdout.split("last_run", 1)[1] and "no disk" in got.stdout
    ticks = await cli(http, "jobs", "ticks", "dies", *api)
    assert ticks.returncode == 0, ticks.stderr
    assert "dead_letter after 2 attempts" in ticks.stdout

    failed = await cli(http, "runs", "failed", *api)
    assert "JOB" in failed.stdout.splitlines()[0] and "breaks" in failed.stdout
    assert "4: no disk" in failed.stdout  # the exit code and the last line it printed
    dead = await cli(http, "dead-letter", *api)
    assert "dies" in dead.stdout and "test-worker" in dead.stdout

    under_way = await cli(http, "runs", "list", *api)  # no arguments: every run under way
    assert under_way.returncode == 0, under_way.stderr
    assert "slow" in under_way.stdout and "test-worker" in under_way.stdout
    assert "running" in under_way.stdout
    bad = await cli(http, "runs", "list", "--state", "failed", *api)
    assert bad.returncode != 0 and "runs failed" in bad.stderr


async def test_concurrency_get_names_the_runs_holding_and_waiting(node, worker, http) -> None:
    once = {"type": "once", "at": "2020-01-01T00:00:00Z"}
    ids = []
    for name in ("first", "second"):
        body = {"name": name, "command": "sleep 30", "schedule": once,
                "concurrency_key": "db", "concurrency_limit": 1}  # fmt: skip
        ids.append((await http.post("/api/v1/jobs", json=body)).json()["job_id"])

    async def one_each() -> dict | None:
        view = (await http.get("/api/v1/concurrency/db")).json()
        return view if view["running"] == 1 and view["waiting"] == 1 else None

    view = await wait_until(one_each, timeout=30)
    (holder,), (waiter,) = view["holding_runs"], view["waiting_runs"]
    assert {holder.split(":")[0], waiter.split(":")[0]} == set(ids)
    out = await cli(http, "concurrency", "get", "db", "--api", str(http.base_url))
    assert out.returncode == 0, out.stderr
    held, waits = out.stdout.split("holding it:")[1].split("waiting, in order:")
    assert holder in held and waiter in waits


async def test_a_watched_list_redraws_when_a_run_changes_and_stops_on_ctrl_c(
    node, worker, http, tmp_path
) -> None:
    token = http.headers["authorization"].removeprefix("Bearer ")
    cmd = shardsched_cmd("runs", "list", "--watch", "--api", str(http.base_url))
    watch = start_logged(
        cmd, tmp_path / "watch.log", env={**child_env(), "SHARDSCHED_TOKEN": token}
    )
    try:
        await trio.to_thread.run_sync(lambda: watch.wait_for_sync("watching", timeout=20))
        body = {"name": "sleepy", "command": "sleep 20",
                "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"}}  # fmt: skip
        assert (await http.post("/api/v1/jobs", json=body)).status_code == 201
        # the change redraws the list: the running run is in it, without a poll
        await trio.to_thread.run_sync(lambda: watch.wait_for_sync("sleepy", timeout=20))
        watch.proc.send_signal(signal.SIGINT)
        code = await trio.to_thread.run_sync(lambda: watch.proc.wait(timeout=20))
        assert code == 0 and "Traceback" not in watch.text()
    finally:
        if watch.proc.poll() is None:
            watch.proc.kill()
            watch.proc.wait()
