"""``shardsched dags …``: the HTTP API from the command line, for people and for scripts.

Speaks HTTP to ``--api`` (default http://127.0.0.1:8080, or SHARDSCHED_API) with the
standard library only. Readable tables by default, the API's own JSON with ``--json``; any
error is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

DEFAULT_API = "http://127.0.0.1:8080"


class CliError(Exception):
    """A one-line message for stderr."""


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--api",
        default=os.environ.get("SHARDSCHED_API", DEFAULT_API),
        metavar="URL",
        help="the HTTP API (default %(default)s, or SHARDSCHED_API)",
    )
    common.add_argument("--json", action="store_true", help="print the API's JSON answer")
    return common


def request(api: str, method: str, path: str, body: Any = None) -> Any:
    """One API call; raises CliError with the API's error message (or why it failed)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        api.rstrip("/") + path,
        data=data,
        method=method,
        headers={"content-type": "application/json"} if data is not None else {},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())["error"]
        except (ValueError, KeyError, TypeError):
            raise CliError(f"{method} {path}: HTTP {exc.code}") from None
        field = (error.get("details") or {}).get("field")
        where = f" (at {field})" if field else ""
        raise CliError(f"{error['code']}: {error['message']}{where}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(f"cannot reach the API at {api}: {reason}") from None


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain aligned columns; '-' for a missing value."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _read_body(source: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{source} is not JSON: {exc}") from None


# --- dags -------------------------------------------------------------------------------


def _show_dag(dag: dict) -> str:
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


def _show_dag_run(run: dict) -> str:
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


def _dags(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    api, cmd = args.api, args.dags_command
    if cmd == "add":
        out = request(api, "POST", "/api/v1/dags", _read_body(args.file))
        return out, lambda o: table(
            ["DAG_ID", "NEXT_RUN", "TASK_JOB_IDS"],
            [[o["dag_id"], o["next_run_at"], " ".join(o["task_job_ids"].values())]],
        )
    if cmd == "list":
        out = request(api, "GET", f"/api/v1/dags?limit={args.limit}")
        return out, lambda o: table(
            ["DAG_ID", "NAME", "STATUS", "TASKS", "ACTIVE", "QUEUED", "NEXT_RUN"],
            [
                [
                    d["dag_id"],
                    d["name"],
                    d["status"],
                    len(d["tasks"]),
                    d["active_runs"],
                    d["queued_runs"],
                    d["next_run_at"],
                ]
                for d in o["dags"]
            ],
        )
    if cmd == "get":
        return request(api, "GET", f"/api/v1/dags/{_q(args.dag_id)}"), _show_dag
    if cmd == "runs":
        out = request(api, "GET", f"/api/v1/dags/{_q(args.dag_id)}/runs?limit={args.limit}")
        return out, lambda o: table(
            ["DAG_RUN_ID", "STATE", "SCHEDULED_FOR", "FINISHED", "TASKS"],
            [
                [
                    r["dag_run_id"],
                    r["state"],
                    r["scheduled_for"],
                    r["finished_at"],
                    " ".join(f"{t['task']}:{t['state']}" for t in r["tasks"]),
                ]
                for r in o["dag_runs"]
            ],
        )
    if cmd == "run":
        return request(api, "GET", f"/api/v1/dag-runs/{_q(args.dag_run_id)}"), _show_dag_run
    if cmd == "trigger":
        out = request(api, "POST", f"/api/v1/dags/{_q(args.dag_id)}/trigger")
        return out, lambda o: f"{o['dag_run_id']}  {o['state']}"
    path = f"/api/v1/dags/{_q(args.dag_id)}"
    if cmd == "delete":
        out = request(api, "DELETE", path)
    else:
        out = request(api, "PATCH", path, {"status": "paused" if cmd == "pause" else "active"})
    return out, lambda o: f"{o['dag_id']}  {o['status']}"


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = _common()
    dags = sub.add_parser("dags", help="register, inspect, trigger, pause/resume/delete DAGs")
    dsub = dags.add_subparsers(dest="dags_command", required=True)
    add = dsub.add_parser("add", parents=[common], help="register a DAG from a JSON file")
    add.add_argument("file", help="the DAG as JSON (POST /api/v1/dags body); - for stdin")
    lst = dsub.add_parser("list", parents=[common], help="every DAG, newest first")
    lst.add_argument("--limit", type=int, default=100)
    for name, text in [
        ("get", "a DAG and its tasks"),
        ("trigger", "open a DAG run now"),
        ("pause", "stop ticking (open DAG runs finish)"),
        ("resume", "tick again from now"),
        ("delete", "delete, keeping history"),
    ]:
        dsub.add_parser(name, parents=[common], help=text).add_argument("dag_id")
    runs = dsub.add_parser("runs", parents=[common], help="a DAG's runs, newest first")
    runs.add_argument("dag_id")
    runs.add_argument("--limit", type=int, default=20)
    run = dsub.add_parser("run", parents=[common], help="one DAG run: every task, attempts")
    run.add_argument("dag_run_id")


def main(args: argparse.Namespace) -> int:
    try:
        out, show = _dags(args)
    except CliError as exc:
        print(f"shardsched: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2) if args.json else show(out))
    return 0
