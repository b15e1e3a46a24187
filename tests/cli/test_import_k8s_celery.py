"""``shardsched import k8s-cronjob`` and ``import celery-beat``: manifests and beat
schedules become apply files, each untranslatable field said on stderr with why; the
results apply against a real node (a suspended CronJob created paused)."""

from __future__ import annotations

import subprocess
import textwrap

import yaml

from conftest import child_env, cli, shardsched_cmd
from shardsched.core.celery_import import BeatEntry, read_beat
from shardsched.core.k8s_import import read_cronjobs

MANIFEST = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly-report, namespace: billing}
spec:
  schedule: "0 2 * * *"
  timeZone: Europe/Berlin
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  suspend: true
  successfulJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 2
      activeDeadlineSeconds: 600
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: report
            image: registry.example/report:1.4
            command: ["/bin/sh", "-c"]
            args: ["make-report --day yesterday > /tmp/report.txt"]
            env:
            - {name: MODE, value: full}
            - name: DB_PASSWORD
              valueFrom: {secretKeyRef: {name: db, key: password}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: sidecars}
spec:
  schedule: "@hourly"
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: a, image: x, command: [a]}, {name: b, image: y, command: [b]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
"""


def test_a_cronjob_keeps_its_schedule_policies_and_command() -> None:
    out = read_cronjobs(list(yaml.safe_load_all(MANIFEST)), "cron.yaml")
    (job,) = out.documents
    assert job == {
        "kind": "job",
        "id": "billing-nightly-report",
        "name": "billing/nightly-report",
        "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Berlin"},
        "command": "/bin/sh -c 'make-report --day yesterday > /tmp/report.txt'",
        "labels": {"k8s-namespace": "billing"},
        "overlap": "forbid",
        "start_deadline_s": 300.0,
        "paused": True,
        "retry_policy": {"max_attempts": 3},
        "timeout_s": 600.0,
        "env": {"MODE": "full"},
    }
    said = "\n".join(out.warnings)
    assert "DB_PASSWORD comes from a secret" in said
    assert "registry.example/report:1.4' is not pulled" in said
    assert "successfulJobsHistoryLimit is not translated" in said
    assert "a pod of 2 containers" in said and "'ConfigMap', not a CronJob" in said


def test_a_beat_schedule_translates_crontab_and_intervals_and_names_the_rest() -> None:
    entries = [
        BeatEntry("every-5-min", "tasks.ping", "every", ["300.0"]),
        BeatEntry(
            "weekday-mornings",
            "tasks.report",
            "crontab",
            ["30", "7", "*", "*", "mon-fri"],
            args=[1, "x"],
            kwargs={"full": True},
            queue="reports",
        ),
        BeatEntry("both-days", "tasks.x", "crontab", ["0", "0", "1", "*", "mon"]),
        BeatEntry("dawn", "tasks.y", "other", ["solar"]),
    ]
    out = read_beat(entries, "proj", "Europe/Berlin")
    by_name = {d["name"]: d for d in out.documents}
    assert by_name["every-5-min"]["schedule"] == {"type": "interval", "every_s": 300.0}
    assert by_name["weekday-mornings"]["schedule"]["expression"] == "30 7 * * mon-fri"
    assert by_name["weekday-mornings"]["command"] == (
        "celery -A proj call tasks.report --args '[1, \"x\"]' --kwargs '{\"full\": true}'"
        " --queue reports"
    )
    said = "\n".join(out.warnings)
    assert "day_of_month AND day_of_week" in said and "solar schedules" in said
    assert len(out.warnings) == 2


BEAT_MODULE = """
from datetime import timedelta

from celery import Celery
from celery.schedules import crontab, solar

app = Celery("proj")
app.conf.timezone = "America/New_York"
app.conf.beat_schedule = {
    "cleanup": {"task": "proj.cleanup", "schedule": crontab(minute=0, hour="*/3")},
    "heartbeat": {"task": "proj.beat", "schedule": timedelta(seconds=30), "args": (1,)},
    "sunrise": {"task": "proj.lights", "schedule": solar("sunrise", 40.7, -74.0)},
    "sundays": {"task": "proj.week", "schedule": crontab(minute=0, hour=0, day_of_week="sunday"),
                "options": {"queue": "q", "expires": 60, "priority": 3}},
    "no-task": {"schedule": timedelta(hours=1)},
    "pickled": {"task": "proj.p", "schedule": timedelta(hours=1), "args": (object(),)},
}
"""


async def test_imported_files_apply_and_a_suspended_cronjob_is_paused(node, http, tmp_path) -> None:
    (tmp_path / "cron.yaml").write_text(MANIFEST)
    (tmp_path / "proj_beat.py").write_text(textwrap.dedent(BEAT_MODULE))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            shardsched_cmd("import", *args),
            capture_output=True, text=True, env=child_env(), timeout=60, cwd=tmp_path,
        )  # fmt: skip

    k8s = run("k8s-cronjob", "cron.yaml")
    beat = run("celery-beat", "proj_beat")
    assert k8s.returncode == 0 and beat.returncode == 0, k8s.stderr + beat.stderr
    assert "solar schedules" in beat.stderr
    assert "zone America/New_York)" in beat.stdout
    # found by an independent tester: Celery's own names, a missing task, args JSON
    # cannot say, options dropped: each said, none a traceback
    assert "expression: 0 0 * * 0" in beat.stdout  # day_of_week="sunday", as Celery reads it
    assert "['no-task']: not translated: it names no task" in beat.stderr
    assert "['pickled']: not translated: its args are not JSON" in beat.stderr
    assert "['sundays']: options expires, priority not kept" in beat.stderr
    assert "Traceback" not in beat.stderr
    (tmp_path / "all.yaml").write_text(k8s.stdout + "\n---\n" + beat.stdout)
    apply = ("--api", str(http.base_url), "apply", "-f", str(tmp_path / "all.yaml"))
    done = await cli(http, *apply, "--set", "moved")
    assert done.returncode == 0, done.stderr
    assert "created, paused" in done.stdout
    got = await http.get("/api/v1/jobs/billing-nightly-report")
    assert got.json()["status"] == "paused" and got.json()["overlap"] == "forbid"
    cleanup = await http.get("/api/v1/jobs/beat-cleanup")
    assert cleanup.json()["schedule"]["timezone"] == "America/New_York"
    again = await cli(http, *apply, "--set", "moved", "--dry-run")
    assert "4 unchanged" in again.stdout, again.stdout
    # declared running again: apply resumes it, and says so
    (tmp_path / "all.yaml").write_text(
        (tmp_path / "all.yaml").read_text().replace("paused: true", "paused: false")
    )
    resumed = await cli(http, *apply, "--set", "moved")
    assert "resumed" in resumed.stdout, resumed.stdout
    assert (await http.get("/api/v1/jobs/billing-nightly-report")).json()["status"] == "active"
    bad = run("celery-beat", "no_such_module")
    assert bad.returncode == 1 and "cannot import no_such_module" in bad.stderr
    (tmp_path / "exits_beat.py").write_text("import sys\nsys.exit(0)\n")
    exits = run("celery-beat", "exits_beat")
    assert exits.returncode == 1 and "cannot import exits_beat: SystemExit" in exits.stderr
    nope = run("celery-beat", "proj_beat:nope")
    assert nope.returncode == 1 and "has no attribute 'nope'" in nope.stderr


def test_the_importing_page_runs_as_printed(tmp_path) -> None:
    """docs/importing.md's manifest and beat module, imported: what the page says."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "importing.md").read_text()

    def block(tag: str) -> str:
        return re.search(rf"```{tag}\n(.*?)```", page, re.DOTALL).group(1)

    (tmp_path / "report.yaml").write_text(block("yaml k8s"))
    (tmp_path / "proj.py").write_text(block("python beat"))
    for args, said, wanted in [
        (("k8s-cronjob", "report.yaml"), "text k8s-stderr", ["billing-nightly-report"]),
        (("celery-beat", "proj"), "text beat-stderr", ["beat-invoices", "beat-heartbeat"]),
    ]:
        out = subprocess.run(
            shardsched_cmd("import", *args),
            capture_output=True, text=True, env=child_env(), timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert out.returncode == 0 and out.stderr == block(said), out.stderr
        ids = [d["id"] for d in yaml.safe_load_all(out.stdout) if d]
        assert ids == wanted


def test_manifests_found_odd_by_an_independent_tester() -> None:
    """``$(VAR)`` as Kubernetes expands it, a forbidden env name dropped (the job kept),
    ``@every``, and what Kubernetes itself refuses (a non-string command word, a string
    ``suspend``, an empty ``timeZone``) said, not guessed."""

    def cronjob(name: str, schedule: str = "0 * * * *", **spec: object) -> dict:
        container = spec.pop("container", None) or {
            "name": "c", "image": "busybox",
            "command": ["echo"], "args": ["$(PLAIN)", "$$(PLAIN)", "$(UNSET)"],
            "env": [{"name": "PLAIN", "value": "v1"}, {"name": "LD_PRELOAD", "value": "x.so"}],
        }  # fmt: skip
        template = {"spec": {"template": {"spec": {"containers": [container]}}}}
        return {"kind": "CronJob", "metadata": {"name": name},
                "spec": {"schedule": schedule, "jobTemplate": template, **spec}}  # fmt: skip

    out = read_cronjobs(
        [
            cronjob("expands"),
            cronjob("every", "@every 1h30m"),
            cronjob("words", container={"name": "c", "image": "i", "command": [["a"], 5]}),
            cronjob("suspend-text", suspend="yes"),
            cronjob("no-zone", timeZone=""),
        ],
        "odd.yaml",
    )
    by_name = {d["name"]: d for d in out.documents}
    assert sorted(by_name) == ["default/every", "default/expands"]
    assert by_name["default/expands"]["command"] == "echo v1 '$(PLAIN)' '$(UNSET)'"
    assert by_name["default/expands"]["env"] == {"PLAIN": "v1"}
    assert by_name["default/every"]["schedule"] == {"type": "interval", "every_s": 5400.0}
    said = "\n".join(out.warnings)
    assert "env LD_PRELOAD is not kept: the loader, a shell or a runtime" in said
    assert "(words): not translated: command and args are lists of strings" in said
    assert "(suspend-text): not translated: suspend 'yes' is not true or false" in said
    assert "(no-zone): not translated: timeZone '' is not a zone's name" in said
    assert "^(?!" not in said, "no regex in what a user reads"
