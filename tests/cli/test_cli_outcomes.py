"""The CLI says how things ended (issue #50): ``jobs list`` has a last outcome and a
``--health failing`` filter, ``jobs get`` the last run, ``jobs ticks`` each tick with how
its run ended, ``runs failed`` and ``dead-letter`` name the job and the reason, and ``runs
list`` with no arguments lists every run under way with its job and worker."""

from __future__ import annotations

from conftest import cli, wait_until


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
    assert "failed" in got.stdout.split("last_run", 1)[1]
    ticks = await cli(http, "jobs", "ticks", "dies", *api)
    assert ticks.returncode == 0, ticks.stderr
    assert "dead_letter after 2 attempts" in ticks.stdout

    failed = await cli(http, "runs", "failed", *api)
    assert "JOB" in failed.stdout.splitlines()[0] and "breaks" in failed.stdout
    assert "exit 4" in failed.stdout or " 4" in failed.stdout
    dead = await cli(http, "dead-letter", *api)
    assert "dies" in dead.stdout and "test-worker" in dead.stdout

    under_way = await cli(http, "runs", "list", *api)  # no arguments: every run under way
    assert under_way.returncode == 0, under_way.stderr
    assert "slow" in under_way.stdout and "test-worker" in under_way.stdout
    assert "running" in under_way.stdout
    bad = await cli(http, "runs", "list", "--state", "failed", *api)
    assert bad.returncode != 0 and "runs failed" in bad.stderr
