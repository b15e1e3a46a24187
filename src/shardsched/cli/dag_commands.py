"""``shardsched dags …``: DAGs from the command line, over the HTTP API (see
:mod:`.api` for the flags every command shares)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from shardsched.cli import edit, follow, style
from shardsched.cli.create import duration_arg, json_object_arg, key_value
from shardsched.cli.handles import dag_id_of, dag_run_id_of
from shardsched.cli.http import read_body, request
from shardsched.cli.render import (
    changes_table,
    page_args,
    page_query,
    quoted,
    show_dag,
    show_dag_run,
    table,
)


def run(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    api, cmd = args.api, args.dags_command
    if getattr(args, "dag_id", None):  # a DAG named by its name, as a job is
        args.dag_id = dag_id_of(api, args.dag_id)
    if getattr(args, "dag_run_id", None):
        args.dag_run_id = dag_run_id_of(api, args.dag_run_id)
    if cmd in ("clear", "mark"):
        return repair(args)
    if cmd == "edit":
        return edit.run_edit(args, "dag")
    if cmd == "add":
        out = request(api, "POST", "/api/v1/dags", read_body(args.file))
        return out, lambda o: table(
            ["DAG_ID", "NEXT_RUN", "TASK_JOB_IDS"],
            [[o["dag_id"], style.when(o["next_run_at"]), " ".join(o["task_job_ids"].values())]],
        )
    if cmd == "list":
        query = {
            "limit": args.limit,
            "include_deleted": "true" if args.include_deleted else None,
            "label": ",".join(f"{k}:{v}" for k, v in args.label or []) or None,
        }
        out = request(api, "GET", "/api/v1/dags" + page_query(query))
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
                    style.when(d["next_run_at"]),
                ]
                for d in o["dags"]
            ],
        )
    if cmd == "get":
        return request(api, "GET", f"/api/v1/dags/{quoted(args.dag_id)}"), show_dag
    if cmd == "runs":
        out = request(api, "GET", f"/api/v1/dags/{quoted(args.dag_id)}/runs?limit={args.limit}")
        return out, lambda o: table(
            ["DAG_RUN_ID", "STATE", "SCHEDULED_FOR", "FINISHED", "TASKS"],
            [
                [
                    r["dag_run_id"],
                    r["state"],
                    style.when(r["scheduled_for"]),
                    style.when(r["finished_at"]),
                    " ".join(f"{t['task']}:{t['state']}" for t in r["tasks"]),
                ]
                for r in o["dag_runs"]
            ],
        )
    if cmd == "run":
        return request(api, "GET", f"/api/v1/dag-runs/{quoted(args.dag_run_id)}"), show_dag_run
    if cmd == "cancel-run":
        body = {"reason": args.reason} if args.reason else None
        path = f"/api/v1/dag-runs/{quoted(args.dag_run_id)}/cancel"
        return request(api, "POST", path, body), show_dag_run
    if cmd == "changes":
        path = f"/api/v1/dags/{quoted(args.dag_id)}/changes" + page_query(page_args(args))
        return request(api, "GET", path), changes_table
    if cmd == "trigger":
        body = None if args.run_args is None else {"args": args.run_args}
        out = request(api, "POST", f"/api/v1/dags/{quoted(args.dag_id)}/trigger", body)
        if not args.watch:
            return out, lambda o: f"{o['dag_run_id']}  {o['state']}"
        print(f"{out['dag_run_id']}  {out['state']}", file=sys.stderr)
        run = follow.watch_dag_run(api, out["dag_run_id"], args.timeout)
        args.exit_status = 0 if run["state"] == "succeeded" else 1
        return run, lambda o: f"{o['dag_run_id']}  {o['state']}"
    path = f"/api/v1/dags/{quoted(args.dag_id)}"
    if cmd == "delete":
        out = request(api, "DELETE", path)
    elif cmd == "restore":
        out = request(api, "POST", path + "/restore")
    else:
        out = request(api, "PATCH", path, {"status": "paused" if cmd == "pause" else "active"})
    return out, lambda o: f"{o['dag_id']}  {o['status']}"


def repair(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    """``dags clear`` and ``dags mark``: the plan is made first (a dry run) and shown, then
    applied by its token, so what runs is what was shown, or nothing if the DAG run moved
    meanwhile."""
    path = f"/api/v1/dag-runs/{quoted(args.dag_run_id)}/{args.dags_command}"
    body: dict[str, Any] = {"task": args.task, "note": args.note or ""}
    if args.dags_command == "clear":
        body |= {"downstream": not args.no_downstream, "upstream": args.upstream,
                 "only_failed": args.only_failed}  # fmt: skip
    else:
        body["state"] = args.state
    plan = request(args.api, "POST", path, {**body, "dry_run": True})
    if args.dry_run:
        return plan, plan_text
    print(plan_text(plan), file=sys.stderr)
    return request(args.api, "POST", path, {**body, "token": plan["token"]}), plan_text


def plan_text(o: dict[str, Any]) -> str:
    """A repair's plan (or what it did): each task, its change, attempt and retries left."""
    version = f"topology version {o['topology_version']}"
    if o.get("ran_on_topology_version"):
        version += f" (it ran on {o['ran_on_topology_version']}, no longer kept)"
    elif o["topology_version"] != o["current_topology_version"]:
        version += f" (the DAG is on {o['current_topology_version']} now)"
    head = (f"{'applied' if o['applied'] else 'plan'}: {o['action']} in {o['dag_run_id']} "
            f"({o['dag_run_state']}), on its {version}")  # fmt: skip
    rows = [[t["task"], t["state"], t["change"], t.get("attempt", ""),
             "" if t.get("retries_left") is None else t["retries_left"]]
            for t in o["tasks"]]  # fmt: skip
    text = head + "\n" + table(["TASK", "NOW", "CHANGE", "ATTEMPT", "RETRIES_LEFT"], rows)
    if o["applied"]:
        text += "\nnew runs: " + (" ".join(o["new_runs"]) or "none yet (waiting on upstream)")
    else:
        text += f"\ntoken: {o['token']}"
    return text


def add_parser(
    sub: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
    page: Callable[[argparse.ArgumentParser, int], None],
) -> None:
    dags = sub.add_parser("dags", help="register, inspect, trigger, pause/resume/delete DAGs")
    dsub = dags.add_subparsers(dest="dags_command", required=True)
    add = dsub.add_parser("add", parents=[common], help="register a DAG from a JSON or YAML file")
    add.add_argument("file", help="the DAG as JSON or YAML (POST /api/v1/dags body); - for stdin")
    lst = dsub.add_parser("list", parents=[common], help="every DAG, newest first")
    lst.add_argument("--limit", type=int, default=50)
    lst.add_argument("--include-deleted", action="store_true", help="deleted DAGs too")
    lst.add_argument("--label", type=key_value, action="append", metavar="KEY=VALUE",
                     help="only DAGs with this label (repeat: all of them)")  # fmt: skip
    for name, text in [
        ("get", "a DAG and its tasks"),
        ("pause", "stop ticking (open DAG runs finish)"),
        ("resume", "tick again from now"),
        ("delete", "delete, keeping history"),
        ("restore", "bring a deleted DAG back (its last definition) as a new incarnation"),
        ("edit", "change it in $EDITOR (YAML), applied as a new version with If-Match"),
    ]:
        dsub.add_parser(name, parents=[common], help=text).add_argument("dag_id")
    trigger = dsub.add_parser("trigger", parents=[common], help="open a DAG run now")
    trigger.add_argument("dag_id")
    trigger.add_argument(
        "--args", dest="run_args", type=json_object_arg, metavar="JSON",
        help="args the DAG run's tasks share",
    )  # fmt: skip
    trigger.add_argument("--watch", action="store_true", help="show each task as it changes")
    trigger.add_argument(
        "--timeout", type=duration_arg, default=None, metavar="DURATION", help="with --watch"
    )
    dag_runs = dsub.add_parser("runs", parents=[common], help="a DAG's runs, newest first")
    dag_runs.add_argument("dag_id")
    dag_runs.add_argument("--limit", type=int, default=50)
    dchanges = dsub.add_parser(
        "changes", parents=[common], help="who changed, paused, triggered it, and when"
    )
    dchanges.add_argument("dag_id")
    page(dchanges, 50)
    run = dsub.add_parser("run", parents=[common], help="one DAG run: every task, attempts")
    run.add_argument("dag_run_id")
    cancel = dsub.add_parser(
        "cancel-run", parents=[common], help="cancel a DAG run and its task runs not yet ended"
    )
    cancel.add_argument("dag_run_id")
    cancel.add_argument("--reason", default=None, help="why (recorded with who)")
    clear = dsub.add_parser(
        "clear", parents=[common],
        help="run a task of a DAG run again (with its downstream), as a new attempt: the plan"
        " is shown, then applied by its token",
    )  # fmt: skip
    clear.add_argument("dag_run_id", help="a DAG run id, or <dag name>:<tick>")
    clear.add_argument("task")
    clear.add_argument("--no-downstream", action="store_true", help="only the task itself")
    clear.add_argument("--upstream", action="store_true", help="its upstream tasks too")
    clear.add_argument("--only-failed", action="store_true", help="not the ones that succeeded")
    clear.add_argument("--note", default=None, help="why (recorded with who)")
    clear.add_argument("--dry-run", action="store_true", help="show the plan; change nothing")
    mark = dsub.add_parser(
        "mark", parents=[common],
        help="end a task of a DAG run as succeeded or failed by hand; its skipped downstream"
        " reacts as if it had",
    )  # fmt: skip
    mark.add_argument("dag_run_id", help="a DAG run id, or <dag name>:<tick>")
    mark.add_argument("task")
    mark.add_argument("state", choices=["succeeded", "failed"])
    mark.add_argument("--note", default=None, help="why (recorded with who)")
    mark.add_argument("--dry-run", action="store_true", help="show the plan; change nothing")
