"""`shardsched apply -f`, `jobs create` and `jobs edit` as a user runs them (issue #17):
files of many objects upserted, a dry run that writes nothing, prune of the apply set
only, bad files refused before any write, an edit guarded by If-Match."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import cli, keyspace


async def written(redis, namespace) -> dict:
    """The keyspace but the node's own heartbeat (which changes on its own)."""
    return {k: v for k, v in (await keyspace(redis, namespace)).items() if b"{g}:node" not in k}


JOBS_YAML = """\
kind: job
id: nightly-report
name: nightly report
command: echo report
schedule: {type: cron, expression: "0 3 * * *", timezone: Europe/Berlin}
---
kind: job
id: heartbeat
name: heartbeat
command: "true"
schedule: {type: interval, every_s: 60}
"""
ONE = "kind: job\nid: y\nname: y\ncommand: 'true'\nschedule: {type: interval, every_s: 60}\n"
DAG_JSON = {
    "kind": "dag",
    "id": "dag_etl",
    "name": "etl",
    "schedule": {"type": "cron", "expression": "30 2 * * *"},
    "tasks": [
        {"name": "extract", "command": "true"},
        {"name": "load", "command": "true", "depends_on": ["extract"]},
    ],
}


async def test_apply_creates_updates_prunes_its_own_set_and_dry_runs(
    node, http, redis, namespace, tmp_path: Path
) -> None:
    api = ("--api", str(http.base_url))
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "jobs.yaml").write_text(JOBS_YAML)
    (conf / "etl.json").write_text(json.dumps(DAG_JSON))
    # a job registered another way is never pruned
    other = await http.post(
        "/api/v1/jobs",
        json={
            "name": "by hand",
            "command": "true",
            "schedule": {"type": "interval", "every_s": 60},
        },
    )
    out = await cli(http, "apply", "-f", str(conf), *api)
    assert out.returncode == 0, out.stderr
    assert "2 created" not in out.stdout and "3 created" in out.stdout, out.stdout
    job = (await http.get("/api/v1/jobs/nightly-report")).json()
    assert job["labels"] == {"apply-set": "default"}
    assert job["schedule"]["timezone"] == "Europe/Berlin"
    assert (await http.get("/api/v1/dags/dag_etl")).json()["version"] == 1

    again = await cli(http, "apply", "-f", str(conf), *api, "--json")
    assert [d["outcome"] for d in json.loads(again.stdout)] == ["unchanged"] * 3
    dry_same = await cli(http, "apply", "-f", str(conf), "--dry-run", *api)
    assert dry_same.stdout.count("unchanged ") == 3 and "3 unchanged" in dry_same.stdout

    # a change, a removal: first as a dry run, which writes nothing
    (conf / "jobs.yaml").write_text(JOBS_YAML.split("---")[0].replace("echo report", "echo v2"))
    before = await written(redis, namespace)
    # --prune without a named set is refused: every apply without --set shares 'default'
    unnamed = await cli(http, "apply", "-f", str(conf), "--prune", *api)
    assert unnamed.returncode == 1 and "name the set with --set" in unnamed.stderr
    assert await written(redis, namespace) == before
    dry = await cli(
        http, "apply", "-f", str(conf), "--prune", "--set", "default", "--dry-run", *api
    )
    assert dry.returncode == 0, dry.stderr
    assert "update    job nightly-report" in dry.stdout
    assert "-command: echo report" in dry.stdout and "+command: echo v2" in dry.stdout
    assert "next: " in dry.stdout and " 03:00 UTC+01:00" in dry.stdout  # Berlin's wall clock
    assert "delete    job heartbeat" in dry.stdout
    assert other.json()["job_id"] not in dry.stdout
    assert "(dry run: nothing written)" in dry.stdout
    assert await written(redis, namespace) == before

    done = await cli(http, "apply", "-f", str(conf), "--prune", "--set", "default", *api, "--json")
    outcomes = {d["id"]: d["outcome"] for d in json.loads(done.stdout)}
    assert outcomes == {"nightly-report": "updated", "dag_etl": "unchanged", "heartbeat": "deleted"}
    assert (await http.get("/api/v1/jobs/heartbeat")).json()["status"] == "deleted"
    assert (await http.get(f"/api/v1/jobs/{other.json()['job_id']}")).json()["status"] == "active"
    assert (await http.get("/api/v1/jobs/nightly-report")).json()["version"] == 2

    # the removal reverted (as in git) and applied again: the deleted id comes back
    (conf / "jobs.yaml").write_text(JOBS_YAML)
    dry_back = await cli(http, "apply", "-f", str(conf), "--dry-run", *api)
    assert "recreate  job heartbeat" in dry_back.stdout, dry_back.stdout
    back = await cli(http, "apply", "-f", str(conf), *api, "--json")
    assert back.returncode == 0, back.stderr
    assert {d["id"]: d["outcome"] for d in json.loads(back.stdout)}["heartbeat"] == "created"
    heartbeat = (await http.get("/api/v1/jobs/heartbeat")).json()
    assert heartbeat["status"] == "active" and heartbeat["incarnation"] == 2


async def test_apply_refuses_a_bad_file_before_writing_anything(
    node, http, redis, namespace, tmp_path: Path
) -> None:
    api = ("--api", str(http.base_url))
    good = JOBS_YAML.split("---")[1]
    before = await written(redis, namespace)
    for text, needle in [
        (
            good
            + "---\n"
            + ONE.replace("{type: interval, every_s: 60}", "{type: cron, expression: x}"),
            "5 fields",
        ),
        (good + "---\nkind: cronjob\nid: x\n", "kind must be one of calendar, concurrency"),
        (
            good
            + "---\nkind: calendar\nid: days-off\nranges: [{start: 2026-02-01, end: 2026-01-01}]\n",
            "a range ends before it starts",
        ),
        (good + "---\nkind: calendar\nid: _x\n", "a calendar's name is"),
        (good + "---\nkind: calendar\nid: false\n", "id must be text, not False: quote it"),
        (good + "---\nkind: concurrency\nid: k\nlimit: 0\n", "$.limit"),
        (good + "---\nkind: concurrency\nid: k\n", "says limit, rate or both"),
        # an id is the path of its PUT: checked with the rest, before anything is written
        (good + "---\n" + ONE.replace("id: y", 'id: "bad\\0id"'), "$.id: a job id is"),
        (good + "---\nkind: dag\nid: ../x\n", "$.id: a DAG id is"),
        (good + "---\nkind: concurrency\nid: a/b\nlimit: 1\n", "is not a concurrency key"),
        (good + "---\nkind: job\nname: x\n", "needs an id"),
        (good + "---\n" + good, "declared in"),
        (
            good + "---\n" + ONE + "bogus: 1\n",
            "bogus",
        ),
        ("kind: job\n  id: [", "is not YAML"),
    ]:
        path = tmp_path / "bad.yaml"
        path.write_text(text)
        out = await cli(http, "apply", "-f", str(path), *api)
        assert out.returncode == 1, (text, out)
        assert needle in out.stderr and out.stderr.count("\n") == 1, (needle, out.stderr)
    out = await cli(http, "apply", "-f", str(tmp_path / "nothing-here"), *api)
    assert out.returncode == 1 and "no such file" in out.stderr
    assert await written(redis, namespace) == before


async def test_jobs_create_from_flags(node, http) -> None:
    api = ("--api", str(http.base_url))
    out = await cli(
        http,
        "jobs",
        "create",
        "backup",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Berlin",
        "--command",
        "pg_dump db",
        "--timeout",
        "20m",
        "--retries",
        "3",
        "--id",
        "db-backup",
        "--env",
        "PGHOST=db",
        "--label",
        "team=data",
        *api,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("db-backup  next run ")
    job = (await http.get("/api/v1/jobs/db-backup")).json()
    assert job["timeout_s"] == 1200 and job["retry_policy"]["max_attempts"] == 4
    assert job["schedule"] == {
        "type": "cron",
        "expression": "0 3 * * *",
        "timezone": "Europe/Berlin",
    }
    assert job["env"] == {"PGHOST": "db"} and job["labels"] == {"team": "data"}
    out = await cli(
        http, "jobs", "create", "tick", "--every", "1h30m", "--command", "true", *api, "--json"
    )
    created = json.loads(out.stdout)["job_id"]
    assert (await http.get(f"/api/v1/jobs/{created}")).json()["schedule"]["every_s"] == 5400
    out = await cli(
        http, "jobs", "create", "on-gpu", "--every", "1h", "--command", "true", "--queue", "gpu",
        *api, "--json",
    )  # fmt: skip
    created = json.loads(out.stdout)["job_id"]
    assert (await http.get(f"/api/v1/jobs/{created}")).json()["queue"] == "gpu"
    out = await cli(http, "jobs", "get", created, *api)
    assert "queue" in out.stdout and "gpu" in out.stdout, out.stdout
    # the global --tz only shows times in a zone: the schedule's zone stays UTC; a macro
    out = await cli(
        http, "--tz", "Asia/Tokyo", "jobs", "create", "daily", "--cron", "@daily",
        "--command", "true", *api, "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    daily = (await http.get(f"/api/v1/jobs/{json.loads(out.stdout)['job_id']}")).json()
    assert daily["schedule"] == {"type": "cron", "expression": "@daily", "timezone": "UTC"}
    assert daily["next_run_at"].endswith("T00:00:00Z")
    out = await cli(
        http, "jobs", "create", "berlin", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
        "--dst-gap", "skip", "--dst-repeat", "both", "--dialect", "debian", "--spread", "90s",
        "--command", "true",
        "--max-fires", "7", "--ends-at", "2031-01-01T00:00:00Z", "--start-deadline", "5m",
        "--skip-late-start", "--finish-deadline", "1h", "--expect-success-within", "2d",
        *api, "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    berlin = (await http.get(f"/api/v1/jobs/{json.loads(out.stdout)['job_id']}")).json()
    assert berlin["schedule"]["dst"] == {"gap": "skip", "repeat": "both"}
    assert berlin["schedule"]["dialect"] == "debian"
    assert (berlin["start_deadline_s"], berlin["skip_late_start"]) == (300, True)
    assert berlin["finish_deadline_s"] == 3600
    assert berlin["expect_success_within_s"] == 2 * 86400
    assert berlin["spread_s"] == 90 and berlin["max_fires"] == 7 and berlin["fires_left"] == 7
    assert berlin["ends_at"] == "2031-01-01T00:00:00Z"
    shown = await cli(http, "jobs", "get", berlin["job_id"], *api)
    rows = {" ".join(line.split()) for line in shown.stdout.splitlines()}
    for row in (
        "max_fires 7 (7 left)",
        "dst gap=skip repeat=both",
        "dialect debian",
        "spread 1m30s",
        "start_deadline 5m (a late run is skipped)",
        "finish_deadline 1h",
        "expect_success_within 2d",
    ):
        assert row in rows, shown.stdout
    for args, needle in [
        (("--command", "true"), "exactly one schedule"),
        (("--command", "true", "--every", "1m", "--at", "2030-01-01T00:00:00Z"), "exactly one"),
        (("--command", "true", "--every", "soon"), "is not a duration"),
        (
            ("--command", "true", "--every", "1m", "--tz", "UTC"),
            "--timezone, --dst-* and --dialect go",
        ),
        (("--command", "true", "--every", "1m", "--dst-gap", "skip"), "go with --cron"),
        (("--command", "true", "--cron", "@daily", "--dst-gap", "later"), "invalid choice"),
        (("--command", "true", "--cron", "@daily", "--dialect", "vixie"), "invalid choice"),
        (("--command", "true", "--every", "1m", "--dialect", "debian"), "go with --cron"),
        (("--command", "true", "--cron", "61 * * * *"), "61"),
        (("--command", "true", "--every", "1m", "--id", "db-backup"), "id_taken"),
        (("--command", "true", "--every", "1m", "--queue", "GPU"), "queue"),
        (("--command", "true", "--every", "1m", "--finish-deadline", "soon"), "not a duration"),
        (("--command", "true", "--every", "1m", "--start-deadline", "0s"), "start_deadline_s"),
    ]:
        out = await cli(http, "jobs", "create", "bad", *args, *api)
        assert out.returncode != 0 and needle in out.stderr, (args, out.stderr)


async def test_jobs_edit_applies_with_if_match(node, http, tmp_path: Path) -> None:
    api = ("--api", str(http.base_url))
    await http.put(
        "/api/v1/jobs/edited",
        json={"name": "e", "command": "echo one", "schedule": {"type": "interval", "every_s": 60}},
    )
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('echo one', 'echo two'))\n"
    )
    env_editor = f"{sys.executable} {editor}"
    out = await cli(http, "jobs", "edit", "edited", *api, env={"EDITOR": env_editor})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["edited", "updated", "version", "2"]
    assert (await http.get("/api/v1/jobs/edited")).json()["command"] == "echo two"
    # an editor that changes nothing changes nothing
    out = await cli(http, "jobs", "edit", "edited", *api, env={"EDITOR": "true"})
    assert out.stdout.split() == ["edited", "unchanged", "version", "2"]
    # someone else changes it while the editor is open: refused, nothing overwritten
    racing = tmp_path / "racing.py"
    racing.write_text(
        "import sys, pathlib, httpx, os\n"
        f"httpx.patch('{str(http.base_url).rstrip('/')}/api/v1/jobs/edited',"
        " json={'command': 'echo theirs'},"
        " headers={'authorization': 'Bearer ' + os.environ['SHARDSCHED_TOKEN']})\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('echo two', 'echo mine'))\n"
    )
    out = await cli(
        http, "jobs", "edit", "edited", *api, env={"EDITOR": f"{sys.executable} {racing}"}
    )
    assert out.returncode == 1 and "changed while you edited it" in out.stderr, out
    assert (await http.get("/api/v1/jobs/edited")).json()["command"] == "echo theirs"
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('every_s: 60', 'every_s: -1'))\n"
    )
    out = await cli(http, "jobs", "edit", "edited", *api, env={"EDITOR": f"{sys.executable} {bad}"})
    assert out.returncode == 1 and "every_s" in out.stderr
    assert (await http.get("/api/v1/jobs/edited")).json()["version"] == 3
    assert "your edit is kept in" in out.stderr
    # a failed edit reopens the editor with the error above the user's edit (as kubectl
    # does); fixed there, it applies
    fixes = tmp_path / "fixes.py"
    fixes.write_text(
        "import sys, pathlib\np = pathlib.Path(sys.argv[1])\nt = p.read_text()\n"
        f"log = pathlib.Path({str(tmp_path / 'seen.log')!r})\n"
        "before = log.read_text() if log.exists() else ''\n"
        "log.write_text(before + t + '\\n=====\\n')\n"
        "if '# error: ' in t:\n"
        "    p.write_text(t.replace('every_s: -1', 'every_s: 120'))\n"
        "else:\n"
        "    p.write_text(t.replace('every_s: 60', 'every_s: -1'))\n"
    )
    out = await cli(
        http, "jobs", "edit", "edited", *api, env={"EDITOR": f"{sys.executable} {fixes}"}
    )
    assert out.returncode == 0, out.stderr
    seen = (tmp_path / "seen.log").read_text().split("=====")
    assert "# error: " in seen[1] and "every_s" in seen[1] and "every_s: -1" in seen[1]
    assert (await http.get("/api/v1/jobs/edited")).json()["schedule"]["every_s"] == 120


CALENDAR_AND_LIMITS = """\
kind: job
id: office
name: office hours
command: "true"
schedule: {type: cron, expression: "0 9 * * *"}
calendars: {exclude: [holidays]}
concurrency_key: "tenant:acme"
---
kind: calendar
id: holidays
dates: ["2026-12-25", "2026-01-01"]
description: days off
---
kind: concurrency
id: "tenant:acme"
limit: 3
"""


async def test_apply_puts_calendars_and_limits_before_the_jobs_that_name_them(
    node, http, tmp_path: Path
) -> None:
    """A calendar and a key's limits are declared beside the job that names them (the
    job first in the file): apply puts them first, unlabelled; --prune never deletes one."""
    api = ("--api", str(http.base_url))
    path = tmp_path / "office.yaml"
    path.write_text(CALENDAR_AND_LIMITS)
    out = await cli(http, "apply", "--set", "office", "-f", str(path), *api, "--json")
    assert out.returncode == 0, out.stderr
    assert [(d["kind"], d["outcome"]) for d in json.loads(out.stdout)] == [
        ("calendar", "created"),
        ("concurrency", "created"),
        ("job", "created"),
    ]
    calendar = (await http.get("/api/v1/calendars/holidays")).json()
    assert calendar["dates"] == ["2026-01-01", "2026-12-25"]
    assert (await http.get("/api/v1/concurrency/tenant:acme")).json()["limit"] == 3
    again = await cli(http, "apply", "--set", "office", "-f", str(path), *api)
    assert again.returncode == 0 and again.stdout.endswith("3 unchanged\n"), again.stdout

    # a changed limit is an update, shown as a diff first
    path.write_text(CALENDAR_AND_LIMITS.replace("limit: 3", "limit: 5"))
    dry = await cli(http, "apply", "--set", "office", "-f", str(path), "--dry-run", *api)
    assert "update    concurrency tenant:acme" in dry.stdout and "+limit: 5" in dry.stdout
    out = await cli(http, "apply", "--set", "office", "-f", str(path), *api)
    assert out.returncode == 0 and "2 unchanged, 1 updated" in out.stdout, out.stdout
    assert (await http.get("/api/v1/concurrency/tenant:acme")).json()["limit"] == 5

    # the files no longer declare them: --prune deletes the set's job, never a calendar
    path.write_text(CALENDAR_AND_LIMITS.split("---")[0].replace("office", "other"))
    out = await cli(http, "apply", "--set", "office", "--prune", "-f", str(path), *api)
    assert out.returncode == 0, out.stderr
    assert (await http.get("/api/v1/jobs/office")).json()["status"] == "deleted"
    assert (await http.get("/api/v1/calendars/holidays")).status_code == 200
    assert (await http.get("/api/v1/concurrency/tenant:acme")).json()["limit"] == 5


async def test_prune_with_nothing_declared_is_refused_unless_allowed(
    node, http, tmp_path: Path
) -> None:
    """Found by an independent tester: an import that failed wrote an empty file, and
    ``apply --prune`` of it deleted the whole set."""
    api = ("--api", str(http.base_url))
    (tmp_path / "one.yaml").write_text(
        "kind: job\nid: kept\nname: kept\ncommand: 'true'\n"
        "schedule: {type: interval, every_s: 60}\n"
    )
    (tmp_path / "empty.yaml").write_text("")
    made = await cli(http, "apply", "-f", str(tmp_path / "one.yaml"), "--set", "s", *api)
    assert made.returncode == 0, made.stderr
    empty = ("apply", "-f", str(tmp_path / "empty.yaml"), "--set", "s", "--prune", *api)
    refused = await cli(http, *empty)
    assert refused.returncode != 0 and "the files declare nothing" in refused.stderr
    assert (await http.get("/api/v1/jobs/kept")).json()["status"] == "active"
    allowed = await cli(http, *empty, "--allow-empty")
    assert allowed.returncode == 0 and "1 deleted" in allowed.stdout, allowed.stdout


async def test_a_job_declared_paused_is_created_paused_before_any_tick(
    node, worker, http, tmp_path: Path
) -> None:
    """Found by an independent tester: ``paused: true`` (and a suspended k8s CronJob) was
    a put, then a pause: a job due at once (a past ``once``) ran in between, 8 times in 8.
    Now created with no timer entry and paused in the same put: nothing fires until it
    is resumed."""
    from conftest import rounds_later

    api = ("--api", str(http.base_url))
    (tmp_path / "held.yaml").write_text(  # due the moment it exists
        "kind: job\nid: held\nname: held\ncommand: 'true'\npaused: true\n"
        "schedule: {type: once, at: '2020-01-01T00:00:00Z'}\n"
    )
    done = await cli(http, "apply", "-f", str(tmp_path / "held.yaml"), *api)
    assert done.returncode == 0 and "created, paused" in done.stdout, done.stdout + done.stderr
    job = (await http.get("/api/v1/jobs/held")).json()
    assert job["status"] == "paused" and job.get("no_next_run") is None, job
    await rounds_later(lambda: node.maintainer.rounds, 2)  # a due tick fires in ms
    runs = (await http.get("/api/v1/jobs/held/runs")).json()["runs"]
    assert runs == [], "nothing fired before the resume"
    changes = (await http.get("/api/v1/jobs/held/changes")).json()["changes"]
    assert [c["action"] for c in reversed(changes)][:2] == ["create", "pause"]
    resumed = await http.patch("/api/v1/jobs/held", json={"status": "active"})
    assert resumed.status_code == 200 and resumed.json()["status"] == "active", resumed.text
