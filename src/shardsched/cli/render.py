"""Plain-text rendering for the CLI: tables, schedules, jobs, runs, DAGs and DAG runs,
with anything unprintable escaped."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from shardsched.core.durations import duration_text, parse_duration
from shardsched.core.models import UNPRINTABLE

_UNPRINTABLE = re.compile(f"[{UNPRINTABLE}]")  #: what a Name may not hold (models)


def printable(text: str) -> str:
    """``text`` with control and invisible format characters shown as escapes (``\\x1b``,
    ``\\u202e``): a terminal must never receive them raw from stored data."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str | None = "(none)"
) -> str:
    """Plain aligned columns; '-' for a missing value; control characters escaped; an
    empty list says so under its header (``empty``; None: the header alone)."""
    if not rows:
        return "  ".join(headers) + ("" if empty is None else "\n" + empty)
    cells = [[("-" if v is None else printable(str(v))) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def schedule_text(s: dict) -> str:
    if s["type"] == "cron":
        return f"cron {s['expression']} {s.get('timezone', 'UTC')}"
    if s["type"] == "interval":
        return f"every {duration_text(s['every_s'])}"
    return f"once {s['at']}"


def page_query(query: dict[str, Any]) -> str:
    items = {k: v for k, v in query.items() if v is not None}
    return "?" + urllib.parse.urlencode(items) if items else ""


def more_hint(out: dict) -> str:
    return f"\n(more: --cursor {out['next_cursor']})" if out.get("next_cursor") else ""


def ago(text: str | None) -> str | None:
    """A time flag: RFC 3339 as given, or a duration (``1h``) meaning that long ago."""
    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError:
        return text  # an instant, or nonsense the API names
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


def runs_table(runs: list[dict]) -> str:
    """Runs, one a row; a run read from the cold archive has its state marked ``(archived)``."""
    return table(
        ["RUN_ID", "STATE", "ATTEMPT", "SCHEDULED_FOR", "STARTED", "FINISHED", "EXIT", "REASON"],
        [
            [
                r["run_id"],
                r["state"] + (" (archived)" if r.get("archived") else ""),
                r["attempt"],
                r["scheduled_for"],
                r["started_at"],
                r["finished_at"],
                r["exit_code"],
                r["reason"],
            ]
            for r in runs
        ],
    )


def show_job(job: dict) -> str:
    rows = [
        ["job_id", job["job_id"]],
        ["name", job["name"]],
        ["status", job["status"]],
        ["schedule", schedule_text(job["schedule"])],
        ["next_run_at", job["next_run_at"]],
        ["command", job["command"]],
        ["version", job["version"]],
        ["shard", job["shard"]],
    ]
    for key in ("dag_id", "pause_reason", "paused_until", "auto_pause_after"):
        if job.get(key) is not None:
            rows.append([key, job[key]])
    return table(["FIELD", "VALUE"], rows)


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
                dag["next_run_at"],
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
                run["scheduled_for"],
                run["started_at"],
                run["finished_at"],
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
    rows = [[c["at"], c["action"], c["by"], c["version"], c["detail"]] for c in o["changes"]]
    return table(["AT", "ACTION", "BY", "VERSION", "DETAIL"], rows) + more_hint(o)
