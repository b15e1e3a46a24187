"""Plain-text rendering for the CLI: tables, schedules, jobs, runs, DAGs and DAG runs,
with anything unprintable escaped."""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from shardsched.cli import style
from shardsched.cli.http import CliError
from shardsched.core.durations import duration_text, parse_duration
from shardsched.core.text import UNPRINTABLE

_UNPRINTABLE = re.compile(f"[{UNPRINTABLE}]")  #: what a Name may not hold (core/text)


def printable(text: str) -> str:
    """``text`` with control and invisible format characters shown as escapes (``\\x1b``,
    ``\\u202e``): a terminal must never receive them raw from stored data."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


#: Columns whose values are states, coloured on a terminal.
_STATE_COLUMNS = frozenset({"STATE", "STATUS"})


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str | None = "(none)"
) -> str:
    """Plain aligned columns; '-' for a missing value; control characters escaped; an
    empty list says so under its header (``empty``; None: the header alone). States are
    coloured on a terminal (:mod:`.style`)."""
    if not rows:
        return "  ".join(headers) + ("" if empty is None else "\n" + empty)
    cells = [[("-" if v is None else printable(str(v))) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    states = {i for i, h in enumerate(headers) if h in _STATE_COLUMNS}

    def cell(i: int, text: str, width: int) -> str:
        padded = text.ljust(width)
        if i in states and style.current.colour:
            return (style.painted(text) or text) + padded[len(text) :]
        return padded

    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(cell(i, c, w) for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in cells
    ]
    return "\n".join(lines)


def quoted(value: str) -> str:
    """An id as one path segment; an empty one is refused (``runs get ""`` would name the
    list of runs, not a run)."""
    if not value.strip():
        raise CliError("the id is empty")
    return urllib.parse.quote(value, safe="")


def schedule_text(s: dict, words: bool = False) -> str:
    """``cron 0 3 * * * Europe/Berlin``, ``every 1h30m``, ``once <time>``; ``words``: the
    cron expression described too ("At 03:00")."""
    if s["type"] == "cron":
        text = f"cron {s['expression']} {s.get('timezone', 'UTC')}"
        described = style.cron_words(s["expression"]) if words else None
        return f"{text} ({described})" if described else text
    if s["type"] == "interval":
        return f"every {duration_text(s['every_s'])}"
    if s["type"] == "multi":
        return "any of: " + "; ".join(schedule_text(one, words) for one in s["schedules"])
    if s["type"] == "window":
        zone = s.get("timezone", "UTC")
        return f"once per window: cron {s['cron']} {zone} for {duration_text(s['duration_s'])}"
    return f"once {style.instant(s['at']) if words else s['at']}"


def page_query(query: dict[str, Any]) -> str:
    items = {k: v for k, v in query.items() if v is not None}
    return "?" + urllib.parse.urlencode(items) if items else ""


def more_hint(out: dict) -> str:
    return f"\n(more: --cursor {out['next_cursor']})" if out.get("next_cursor") else ""


def ago(text: str | None) -> str | None:
    """A time flag: RFC 3339 as given, ``now``, or a duration (``1h``) meaning that long
    ago."""
    if text is None:
        return None
    if text.strip().lower() == "now":
        return datetime.now(UTC).isoformat()
    try:
        seconds = parse_duration(text)
    except ValueError:
        return text  # an instant, or nonsense the API names
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


def runs_table(runs: list[dict], across: bool = False) -> str:
    """Runs, one a row: when, how long, how it ended (``-o wide``: the times in full); a
    run read from the cold archive has its state marked ``(archived)``. ``across`` (a
    list of many jobs' runs): which job and which worker too."""
    if style.current.wide:
        headers = ["RUN_ID", "STATE", "TRY", "SCHEDULED_FOR", "STARTED", "FINISHED", "TOOK"]
    else:
        headers = ["RUN_ID", "STATE", "TRY", "SCHEDULED", "TOOK"]
    if across:
        headers[1:1] = ["JOB"]
        headers.append("WORKER")
    rows = []
    for r in runs:
        row = [
            r["run_id"],
            r["state"] + (" (archived)" if r.get("archived") else ""),
            r["attempt"],
            style.when(r["scheduled_for"]),
        ]
        if across:
            row.insert(1, r.get("job_name") or r["job_id"])
        if style.current.wide:
            row += [style.when(r["started_at"]), style.when(r["finished_at"])]
        row.append(style.took(r["started_at"], r["finished_at"]))
        if across:
            row.append(r.get("claimed_by") or "-")
        rows.append([*row, _ending(r)])
    return table([*headers, "EXIT" if not across else "EXIT/REASON"], rows)


def jobs_table(o: dict) -> str:
    """``jobs list``: each job with its last outcome (its newest run's state, how long
    ago) beside its schedule and next fire."""
    rows = []
    for j in o["jobs"]:
        last = (j.get("recent_runs") or [None])[0]
        outcome = "-" if last is None else f"{last['state']} ({style.when(last['scheduled_for'])})"
        rows.append([j["job_id"], j["name"], j["status"], schedule_text(j["schedule"]),
                     style.when(j["next_run_at"]), outcome])  # fmt: skip
    return table(["JOB_ID", "NAME", "STATUS", "SCHEDULE", "NEXT", "LAST"], rows) + more_hint(o)


def _ending(run: dict) -> str | None:
    """The exit code, or why there is none (a timeout, a signal, a skip's reason), and,
    where a list carries the output's tail, its last line: what the job said of it."""
    code, reason = run.get("exit_code"), run.get("reason")
    if code is not None and (not reason or reason == f"exit {code}"):
        text: str | None = str(code)
    else:
        text = reason if code is None else f"{code} ({reason})"
    said = last_line(run.get("output_tail"))
    return f"{text}: {said}" if said and text else (said or text)


def last_line(output: str | None, width: int = 60) -> str | None:
    """The last line a run printed, cut to ``width``."""
    lines = [ln.strip() for ln in (output or "").splitlines() if ln.strip()]
    if not lines:
        return None
    return lines[-1] if len(lines[-1]) <= width else lines[-1][: width - 1] + "…"


def _time_rows(job: dict) -> list[list[Any]]:
    """The job's time policies, where set: why it fires no more, its window, its limits."""
    rows: list[list[Any]] = []
    if job.get("no_next_run"):
        rows.append(["no_next_run", job["no_next_run"]])
    if job.get("schedule", {}).get("dst"):
        rows.append(["dst", " ".join(f"{k}={v}" for k, v in job["schedule"]["dst"].items())])
    if job.get("schedule", {}).get("dialect"):
        rows.append(["dialect", job["schedule"]["dialect"]])
    for key in ("starts_at", "ends_at"):
        if job.get(key):
            rows.append([key, style.instant(job[key])])
    if cal := job.get("calendars"):
        words = [f"+{n}" for n in cal.get("include", [])] + [
            f"-{n}" for n in cal.get("exclude", [])
        ]
        rows.append(["calendars", " ".join(words)])
    if job.get("max_fires") is not None:
        rows.append(["max_fires", f"{job['max_fires']} ({job.get('fires_left')} left)"])
    for key in ("spread_s", "start_deadline_s", "finish_deadline_s", "expect_success_within_s"):
        if job.get(key):
            late = " (a late run is skipped)" if key == "start_deadline_s" else ""
            late = late if job.get("skip_late_start") else ""
            rows.append([key.removesuffix("_s"), duration_text(job[key]) + late])
    if job.get("overlap", "allow") != "allow":
        rows.append(["overlap", job["overlap"]])
    if job.get("on_resume", "skip") != "skip":
        rows.append(["on_resume", job["on_resume"]])
    return rows


def show_job(job: dict, last: dict | None = None) -> str:
    """``jobs get``: its definition, and its last outcome (its newest run) when given."""
    rows = [
        ["job_id", job["job_id"]],
        ["name", job["name"]],
        ["status", job["status"]],
        ["schedule", schedule_text(job["schedule"], words=True)],
        ["next_run_at", style.instant(job["next_run_at"])],
        ["command", job["command"]],
        ["timeout", duration_text(job["timeout_s"])],
        ["retries", job["retry_policy"]["max_attempts"] - 1],
        ["version", job["version"]],
        ["updated_at", style.instant(job["updated_at"])],
        ["shard", job["shard"]],
        ["queue", job.get("queue", "default")],
        ["priority", job.get("priority", "normal")],
    ]
    for key in ("dag_id", "pause_reason", "paused_until", "auto_pause_after"):
        if job.get(key) is not None:
            value = job[key]
            rows.append([key, style.instant(value) if key == "paused_until" else value])
    rows += _time_rows(job)
    if job.get("incarnation", 1) > 1:
        since = style.instant(job.get("incarnation_started_at"))
        rows.append(["incarnation", f"{job['incarnation']} (since {since})"])
    if job.get("labels"):
        rows.append(["labels", " ".join(f"{k}={v}" for k, v in sorted(job["labels"].items()))])
    if job.get("args"):
        rows.append(["args", json.dumps(job["args"], separators=(",", ":"))])
    if last is not None:
        ended = _ending(last)
        rows.append(["last_run", f"{last['run_id']} {last['state']}"
                     f" ({style.when(last['finished_at'] or last['scheduled_for'])})"
                     + (f": {ended}" if ended else "")])  # fmt: skip
    return table(["FIELD", "VALUE"], rows)


def show_run(run: dict) -> str:
    """One run: its row, and the args it was given when it has its own."""
    args = run.get("args")
    tail = f"\nargs {json.dumps(args, separators=(',', ':'))}" if args else ""
    if run.get("queue", "default") != "default" or run.get("priority", "normal") != "normal":
        tail += f"\nqueue {run.get('queue', 'default')} · priority {run.get('priority')}"
    if run.get("deadline_missed"):
        tail += f"\ndeadline missed: {run['deadline_missed']}"
    if run.get("cause"):
        tail += f"\ncause {run['cause']}"
    if run.get("stands_for"):
        count = run.get("stands_for_count") or len(run["stands_for"])
        tail += f"\nstands for {count} later ticks (coalesced)"
    return runs_table([run]) + tail


def show_dag(dag: dict) -> str:
    head = table(
        ["DAG_ID", "NAME", "STATUS", "ACTIVE", "QUEUED", "STALLED", "NEXT_RUN"],
        [
            [
                dag["dag_id"],
                dag["name"],
                dag["status"],
                dag["active_runs"],
                dag["queued_runs"],
                dag["stalled_tasks"],
                style.when(dag["next_run_at"]),
            ]
        ],
    )
    tasks = table(
        ["TASK", "JOB_ID", "DEPENDS_ON", "TRIGGER_RULE", "COMMAND"],
        [
            [
                t["name"],
                dag["task_job_ids"][t["name"]],
                ",".join(t.get("depends_on", [])) or None,
                t.get("trigger_rule", "all_success"),
                t["command"],
            ]
            for t in dag["tasks"]
        ],
    )
    return f"{head}\n\n{tasks}"


def show_dag_run(run: dict) -> str:
    head = table(
        ["DAG_RUN_ID", "STATE", "SCHEDULED_FOR", "STARTED", "FINISHED"],
        [
            [
                run["dag_run_id"],
                run["state"],
                style.when(run["scheduled_for"]),
                style.when(run["started_at"]),
                style.when(run["finished_at"]),
            ]
        ],
    )
    tasks = table(
        ["TASK", "STATE", "ATTEMPTS", "RUN_ID", "STALLED_AT", "REASON"],
        [
            [
                t["task"],
                t["state"],
                len(t.get("attempts", [])) or None,
                t["run_id"],
                t["stalled_at"],
                t["reason"],
            ]
            for t in run["tasks"]
        ],
    )
    return f"{head}\n\n{tasks}"


def page_args(args: Any) -> dict[str, Any]:
    """A page's query from a command's --limit and --cursor."""
    return {"limit": args.limit, "cursor": args.cursor}


def changes_table(o: Any) -> str:
    rows = [
        [style.when(c["at"]), c["action"], c["by"], c["version"], c["detail"]] for c in o["changes"]
    ]
    return table(["AT", "ACTION", "BY", "VERSION", "DETAIL"], rows) + more_hint(o)


def as_text(data: Any, output: str) -> str:
    """Builtins as JSON (one line, as the API answers) or YAML."""
    if output == "yaml":
        import yaml

        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True)).rstrip()
    import json

    return json.dumps(data, separators=(",", ":"))


#: The id fields ``-o name`` prints, in the order they are looked for.
_ID_FIELDS = ("dag_run_id", "run_id", "dag_id", "job_id", "id", "name")


def formatted(out: Any, output: str, show: Callable[[Any], str]) -> str:
    """The answer as the user asked: a table, JSON, YAML, or its ids."""
    if output == "json":
        return json.dumps(out, indent=2)
    if output == "yaml":
        return as_text(out, "yaml")
    if output == "name":
        return "\n".join(_ids(out))
    return show(out)


def answer(args: Any, call: Callable[[], Any], show: Callable[[Any], str]) -> int:
    """A command's whole life: make its call, then print the answer in the form asked
    (``--json`` or ``-o``, a table by default); a refusal is a message and exit code 1."""
    try:
        out = call()
    except CliError as exc:
        print(f"shardsched: {exc}", file=sys.stderr)
        return 1
    output = "json" if args.json else (args.output or "table")
    print(formatted(out, output, show))
    return 0


def _ids(out: Any) -> list[str]:
    if isinstance(out, list):
        return [i for item in out for i in _ids(item)]
    if isinstance(out, dict):
        for key in ("jobs", "runs", "dags", "dag_runs", "events", "changes", "versions"):
            if isinstance(out.get(key), list):
                return _ids(out[key])
        for key in _ID_FIELDS:
            if isinstance(out.get(key), str):
                return [out[key]]
    return []
