"""`shardsched export` as an operator uses it: the definitions there are now, as files
`apply` takes. Applied back they change nothing; applied after the jobs are gone they
bring the same definitions back; filters, a directory of files, and what an export
cannot carry (a pause, a definition today's checks refuse) said plainly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec

from conftest import cli
from shardsched.cli.definitions import spec_of

HOURLY = {"type": "interval", "every_s": 3600}
JOBS = {
    "berlin": {
        "name": "nightly #1 'report' ✓",
        "command": "echo 'a: b' # not a comment",
        "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"},
        "retry_policy": {"max_attempts": 4, "base_s": 2.0},
        "labels": {"team": "data", "tier": "gold"},
        "env": {"MODE": "full run: a # b"},
        "args": {"days": [1, 2], "deep": {"x": None}},
        "start_deadline_s": 120,
        "skip_late_start": True,
        "overlap": "buffer_one",
    },
    "pinger": {"name": "pinger", "command": "true", "schedule": HOURLY, "queue": "io"},
    "held": {"name": "held", "command": "true", "schedule": HOURLY, "labels": {"team": "ops"}},
}
DAG = {
    "name": "etl",
    "schedule": {"type": "cron", "expression": "30 2 * * *"},
    "tasks": [
        {"name": "extract", "command": "true"},
        {"name": "load", "command": "true", "depends_on": ["extract"]},
    ],
}


async def definitions(http) -> dict[str, dict]:
    """Every live job's and DAG's definition, as `jobs get` / `dags get` show it, the
    calendars and the keys' own limits."""
    out = {}
    for kind, plural in (("job", "jobs"), ("dag", "dags")):
        page = (await http.get(f"/api/v1/{plural}", params={"limit": 500})).json()
        for view in page[plural]:
            out[view[f"{kind}_id"]] = spec_of(kind, view)
    for view in (await http.get("/api/v1/calendars")).json()["calendars"]:
        out[f"calendar {view['name']}"] = spec_of("calendar", view)
    for view in (await http.get("/api/v1/concurrency")).json()["keys"]:
        if spec_of("concurrency", view):
            out[f"key {view['key']}"] = spec_of("concurrency", view)
    return out


HOLIDAYS = {"dates": ["2026-12-25", "2026-01-01"], "description": "days off"}
LIMITS = {"limit": 3, "rate": {"max": 10, "per_s": 60}}


async def test_an_export_applied_back_changes_nothing_and_restores_what_was_deleted(
    node, http, redis, dep, tmp_path: Path
) -> None:
    api = ("--api", str(http.base_url))
    assert (await http.put("/api/v1/calendars/holidays", json=HOLIDAYS)).status_code == 201
    assert (await http.put("/api/v1/concurrency/tenant:acme", json=LIMITS)).status_code == 200
    named = {"berlin": {**JOBS["berlin"], "calendars": {"exclude": ["holidays"]}}}
    for job_id, body in {**JOBS, **named}.items():
        made = await http.put(f"/api/v1/jobs/{job_id}", json=body)
        assert made.status_code == 201, made.text
    made = await http.put("/api/v1/dags/etl", json=DAG)
    assert made.status_code == 201, made.text
    joined = {"name": "report", "command": "true", "depends_on": ["dag_etl.load"]}
    assert (await http.post("/api/v1/jobs", json=joined)).status_code == 201
    # a reason of several lines is refused now (core/text), but one stored before that
    # check stays in its comment: it cannot add to the definition
    paused = {"status": "paused", "pause_reason": "db moves\nid: evil\r\ncommand: rm"}
    assert (await http.patch("/api/v1/jobs/held", json=paused)).status_code == 422
    paused["pause_reason"] = "db moves"
    assert (await http.patch("/api/v1/jobs/held", json=paused)).status_code == 200
    held = dep.keys_for("held").job("held")
    await redis.execute("HSET", held, "pr", "db moves\nid: evil\r\ncommand: rm")
    before = await definitions(http)
    # the joined task is the DAG's: exported with it, not as a job
    assert [t["name"] for t in before["dag_etl"]["tasks"]] == ["extract", "load", "report"]

    out = await cli(http, "export", *api)
    assert out.returncode == 0, out.stderr
    assert "1 of these are paused (held)" in out.stderr
    text = out.stdout
    assert "# job held 'held': version 2, paused since" in text
    assert "(db moves id: evil command: rm)" in text and "\nid: evil" not in text
    assert "dag_etl.extract" not in text and "dag_etl.report" not in text  # with the DAG
    # what jobs name first, then jobs, then DAGs, each by id: an export diffs well in git
    assert re.findall(r"^kind: (\w+)\nid: (\S+)$", text, re.M) == [
        ("calendar", "holidays"),
        ("concurrency", "tenant:acme"),
        ("job", "berlin"),
        ("job", "held"),
        ("job", "pinger"),
        ("dag", "dag_etl"),
    ]
    exported = tmp_path / "all.yaml"
    exported.write_text(text)

    # applied to where it came from: every object unchanged (no apply set owns them)
    same = await cli(http, "apply", "--no-label", "-f", str(exported), *api, "--json")
    assert same.returncode == 0, same.stderr
    outcomes = {(d["kind"], d["id"]): d["outcome"] for d in json.loads(same.stdout)}
    assert outcomes == {
        **{("job", j): "unchanged" for j in JOBS},
        ("dag", "dag_etl"): "unchanged",
        ("calendar", "holidays"): "unchanged",
        ("concurrency", "tenant:acme"): "unchanged",
    }, (outcomes, text)

    # everything deleted, then applied from the export: the same definitions again
    for job_id in JOBS:
        assert (await http.delete(f"/api/v1/jobs/{job_id}")).status_code == 200
    assert (await http.delete("/api/v1/dags/dag_etl")).status_code == 200
    assert (await http.delete("/api/v1/calendars/holidays")).status_code == 200
    assert (await http.delete("/api/v1/concurrency/tenant:acme")).status_code == 200
    assert await definitions(http) == {}
    back = await cli(http, "apply", "--no-label", "-f", str(exported), *api, "--json")
    assert back.returncode == 0, back.stderr
    assert {d["outcome"] for d in json.loads(back.stdout)} == {"created"}
    assert await definitions(http) == before
    # a definition is not a state: the paused job comes back active, as stderr said
    assert (await http.get("/api/v1/jobs/held")).json()["status"] == "active"

    # the JSON form is a file apply takes too
    as_json = await cli(http, "export", "--kind", "dag", "-o", "json", *api)
    assert [o["id"] for o in json.loads(as_json.stdout)] == ["dag_etl"]
    (tmp_path / "dag.json").write_text(as_json.stdout)
    again = await cli(http, "apply", "--no-label", "-f", str(tmp_path / "dag.json"), *api)
    assert again.returncode == 0 and "1 unchanged" in again.stdout, again.stdout


async def test_export_filters_and_a_directory_of_files(node, http, tmp_path: Path) -> None:
    api = ("--api", str(http.base_url))
    for job_id, body in JOBS.items():
        await http.put(f"/api/v1/jobs/{job_id}", json=body)
    (tmp_path / "conf.yaml").write_text(
        "kind: job\nid: managed\nname: managed\ncommand: 'true'\n"
        "schedule: {type: interval, every_s: 60}\n"
    )
    applied = await cli(http, "apply", "--set", "prod", "-f", str(tmp_path / "conf.yaml"), *api)
    assert applied.returncode == 0, applied.stderr
    await http.put("/api/v1/dags/etl", json={**DAG, "labels": {"team": "data"}})
    await http.put("/api/v1/calendars/holidays", json=HOLIDAYS)
    await http.put("/api/v1/concurrency/tenant:acme", json=LIMITS)

    async def ids(*flags: str) -> list[str]:
        out = await cli(http, "export", *flags, "-o", "name", *api)
        assert out.returncode == 0, out.stderr
        return sorted(out.stdout.split())

    assert await ids("--set", "prod") == ["managed"]
    # calendars and limits carry no labels: a label filter (or a set) matches none of them
    assert await ids("--label", "team=data") == ["berlin", "dag_etl"]
    assert await ids("--kind", "calendar", "--kind", "concurrency") == ["holidays", "tenant:acme"]
    assert await ids("--label", "team=data", "--kind", "job") == ["berlin"]
    assert await ids("--label", "team=data", "--label", "tier=gold") == ["berlin"]
    assert await ids("--name-prefix", "pin") == ["pinger"]
    assert await ids("--set", "nobody") == []
    nothing = await cli(http, "export", "--set", "nobody", "--dir", str(tmp_path / "n"), *api)
    assert nothing.returncode == 0 and nothing.stdout.strip() == ""
    assert "nothing matched" in nothing.stderr and not (tmp_path / "n").exists()

    # a set exported and applied back with its set: unchanged, and --prune deletes nothing
    out = await cli(http, "export", "--set", "prod", *api)
    (tmp_path / "prod.yaml").write_text(out.stdout)
    back = await cli(
        http, "apply", "--set", "prod", "--prune", "-f", str(tmp_path / "prod.yaml"), *api
    )
    assert back.returncode == 0 and back.stdout.endswith("1 unchanged\n"), back.stdout

    # one file an object, which apply reads as a directory
    target = tmp_path / "exported"
    out = await cli(http, "export", "--dir", str(target), *api)
    assert out.returncode == 0, out.stderr
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*.yaml"))
    assert files == [
        "calendars/holidays.yaml",
        "concurrency/tenant%3Aacme.yaml",
        "dags/dag_etl.yaml",
        "jobs/berlin.yaml",
        "jobs/held.yaml",
        "jobs/managed.yaml",
        "jobs/pinger.yaml",
    ]
    assert "7 written to" in out.stdout
    dry = await cli(http, "apply", "--no-label", "--dry-run", "-f", str(target), *api)
    assert dry.returncode == 0 and "7 unchanged" in dry.stdout, dry.stdout

    # into a directory that is not empty (an earlier export would mix in): refused
    refused = await cli(http, "export", "--dir", str(target), *api)
    assert refused.returncode == 1 and "is not empty" in refused.stderr
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*.yaml")) == files
    afile = tmp_path / "conf.yaml"
    assert (await cli(http, "export", "--dir", str(afile), *api)).returncode == 1


async def test_a_definition_stored_before_a_check_is_exported_as_it_is(
    node, http, redis, dep
) -> None:
    """A job kept from before a check it now fails (here: skip_late_start with no start
    deadline, refused since 0.2.0) is exported all the same, with why apply refuses it."""
    api = ("--api", str(http.base_url))
    await http.put("/api/v1/jobs/old", json=JOBS["pinger"])
    key = dep.keys_for("old").job("old")
    spec = msgspec.json.decode(await redis.execute("HGET", key, "spec"))
    await redis.execute("HSET", key, "spec", json.dumps({**spec, "skip_late_start": True}))
    assert (await http.get("/api/v1/jobs/old")).json()["skip_late_start"] is True

    out = await cli(http, "export", *api)
    assert out.returncode == 0, out.stderr
    assert "# apply refuses this definition as it is: job old: $.skip_late_start:" in out.stdout
    assert "skip_late_start: true" in out.stdout
