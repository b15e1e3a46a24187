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


async def test_apply_writes_upstreams_first_and_refuses_a_cycle_before_writing(
    http, node, tmp_path, redis, namespace
) -> None:
    """Found by the independent tester: `apply` wrote in file order, so a chain listed
    downstream first was refused half-way (and an export, sorted by id, could not be
    applied back). Now upstreams go first, a DAG before the job after it, and a cycle
    among the files stops the apply before anything is written."""
    from conftest import keyspace

    api = ["--api", str(http.base_url)]
    chain = tmp_path / "chain.yaml"
    chain.write_text(
        "kind: job\nid: load\nname: load\ncommand: 'true'\non: [{after: 'job:transform'}]\n"
        "---\nkind: job\nid: transform\nname: transform\ncommand: 'true'\n"
        "on: [{after: 'dag:etl'}]\n"
        "---\nkind: dag\nid: etl\nname: etl\nschedule: {type: interval, every_s: 3600}\n"
        "tasks: [{name: a, command: 'true'}]\n"
    )
    done = await cli(http, "apply", "-f", str(chain), *api)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.index("dag_etl") < done.stdout.index("transform") < done.stdout.index("load")
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text(
        "kind: job\nid: p\nname: p\ncommand: 'true'\non: [{after: 'job:q'}]\n"
        "---\nkind: job\nid: q\nname: q\ncommand: 'true'\non: [{after: 'job:p'}]\n"
    )
    before = await keyspace(redis, namespace)
    for args in (["--dry-run"], []):
        refused = await cli(http, "apply", "-f", str(cycle), *args, *api)
        assert refused.returncode != 0, refused.stdout
        assert "a cycle: p runs after q runs after p" in refused.stderr, refused.stderr
    assert await keyspace(redis, namespace) == before
