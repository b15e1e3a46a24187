"""Output people read and output scripts read (issue #17): -o table|wide|json|yaml|name,
times on a stated wall clock and relative to now, cron in words, colour only on request
or a terminal, never with NO_COLOR."""

from __future__ import annotations

import json

import yaml

from conftest import cli, wait_until

CRON = {"type": "cron", "expression": "0 3 * * 1-5", "timezone": "Europe/Berlin"}


async def test_every_output_format_and_the_zone_times_are_shown_in(node, worker, http) -> None:
    api = ("--api", str(http.base_url))
    job = {"name": "out-report", "command": "echo hi", "schedule": CRON}
    job_id = (await http.put("/api/v1/jobs/out-report", json=job)).json()["job_id"]
    run_id = (await http.post(f"/api/v1/jobs/{job_id}/trigger")).json()["run_id"]

    async def done() -> bool:
        return (await http.get(f"/api/v1/runs/{run_id}")).json()["state"] == "succeeded"

    await wait_until(done, timeout=20)

    table = await cli(http, "runs", "list", job_id, *api)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header == ["RUN_ID", "STATE", "TRY", "SCHEDULED", "TOOK", "EXIT"]
    row = table.stdout.splitlines()[1]
    assert ("ago" in row or " now " in row) and row.split()[-1] == "0" and len(row) < 100, row
    wide = await cli(http, "runs", "list", job_id, "-o", "wide", *api, "--tz", "Asia/Tokyo")
    assert "STARTED" in wide.stdout and "JST" in wide.stdout, wide.stdout
    names = await cli(http, "runs", "list", job_id, "-o", "name", *api)
    assert names.stdout.split() == [run_id]
    as_yaml = await cli(http, "runs", "list", job_id, "-o", "yaml", *api)
    assert yaml.safe_load(as_yaml.stdout)["runs"][0]["run_id"] == run_id
    as_json = await cli(http, "-o", "json", "runs", "list", job_id, *api)  # before the command
    assert json.loads(as_json.stdout)["runs"][0]["run_id"] == run_id

    shown = await cli(http, "jobs", "get", job_id, "--tz", "America/New_York", *api)
    text = shown.stdout
    assert "At 03:00, Monday through Friday" in text, text
    next_line = next(line for line in text.splitlines() if line.startswith("next_run_at"))
    assert ("EST" in next_line or "EDT" in next_line) and "(in " in next_line, next_line
    listed = await cli(http, "jobs", "list", "--name-prefix", "out-", *api)
    assert "in " in listed.stdout.splitlines()[1], listed.stdout  # NEXT: in 9h…
    assert (await cli(http, "jobs", "list", "-o", "name", *api)).stdout.split() == [job_id]

    # colour: never into a pipe or with NO_COLOR; always on request
    assert "\x1b[" not in table.stdout
    always = await cli(http, "runs", "list", job_id, "--color", "always", *api)
    assert "\x1b[32msucceeded\x1b[0m" in always.stdout
    assert always.stdout.splitlines()[0] == table.stdout.splitlines()[0]
    bad = await cli(http, "runs", "list", job_id, "--tz", "Mars/Olympus", *api)
    assert bad.returncode == 2 and "no time zone" in bad.stderr
