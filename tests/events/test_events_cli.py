"""The CLI of events and hooks as a user runs it: a hook put with its secret from a file
and from the environment (never an argument), emitted events shown with their outcome,
refusals said with a non-zero exit and nothing written."""

from __future__ import annotations

import json

from conftest import cli


async def test_hooks_and_events_from_the_command_line(http, node, tmp_path) -> None:
    api = ["--api", str(http.base_url)]
    secret = tmp_path / "secret"
    secret.write_text("file-secret-0123456789\n")
    put = await cli(http, "hooks", "put", "cms", "--secret-file", str(secret),
                    "--secret-env", "CMS_NEXT", "--key-header", "X-Id", *api,
                    env={"CMS_NEXT": "env-secret-0123456789"})  # fmt: skip
    assert put.returncode == 0, put.stderr
    assert "secrets  2" in put.stdout and "header X-Id" in put.stdout
    listed = await cli(http, "hooks", "list", *api)
    assert "cms" in listed.stdout and "secret-0123" not in listed.stdout + put.stdout
    job = {"name": "fed", "command": "true", "on": [{"event": "cms.published"}]}
    job_id = (await http.post("/api/v1/jobs", json=job)).json()["job_id"]
    emitted = await cli(http, "events", "emit", "cms.published", "--payload", '{"a": 1}',
                        "--key", "k-1", "--json", *api)  # fmt: skip
    assert emitted.returncode == 0, emitted.stderr
    event = json.loads(emitted.stdout)
    assert event["outcome"]["deliveries"][0]["job_id"] == job_id
    shown = await cli(http, "events", "show", event["event_id"], *api)
    assert "outcome  runs" in shown.stdout and f"{job_id}  created" in shown.stdout
    again = await cli(http, "events", "emit", "cms.published", "--key", "k-1", *api)
    assert "outcome  deduplicated" in again.stdout and event["event_id"] in again.stdout
    received = await cli(http, "events", "received", *api)
    assert received.stdout.count("cms.published") == 2
    for args, said in [
        (["hooks", "put", "x", "--secret-env", "NOT_SET_ANYWHERE"], "is not set"),
        (["hooks", "put", "x"], "give a hook one secret"),
        (["hooks", "put", "x", "--secret-file", str(tmp_path / "none")], "--secret-file"),
        (["events", "emit", "x", "--payload", "{"], "--payload is not JSON"),
        (["events", "emit", "bad name"], "event's name"),
        (["events", "show", "ev_nope"], "not found"),
        (["hooks", "show", "nope"], "not found"),
    ]:
        done = await cli(http, *args, *api)
        assert done.returncode != 0 and said in done.stderr, (args, done.stderr)
    assert (await cli(http, "hooks", "delete", "cms", *api)).returncode == 0
    assert "cms" not in (await cli(http, "hooks", "list", *api)).stdout


async def test_a_queues_default_backlog_from_the_command_line(http, node) -> None:
    api = ["--api", str(http.base_url)]
    done = await cli(http, "queues", "backlog", "slow", "--policy", "coalesce", "--max-queued",
                     "2", *api)  # fmt: skip
    assert done.returncode == 0 and "slow   coalesce  2" in done.stdout, done.stdout + done.stderr
    listed = await cli(http, "queues", "backlog", *api)
    assert "slow" in listed.stdout
    for args, said in [
        (["queues", "backlog", "slow", "--policy", "skip"], "needs a bound"),
        (["queues", "backlog", "slow"], "give --policy"),
        (["queues", "backlog", "--clear"], "name the queue"),
    ]:
        failed = await cli(http, *args, *api)
        assert failed.returncode != 0 and said in failed.stderr, (args, failed.stderr)
    cleared = await cli(http, "queues", "backlog", "slow", "--clear", *api)
    assert "no queue has one" in cleared.stdout
