"""``shardsched jobs|runs|dead-letter|dags …``: the HTTP API from the command line, for
people and for scripts.

Speaks HTTP to ``--api`` (default http://127.0.0.1:8080, or SHARDSCHED_API) with the
standard library only. Readable tables by default, the API's own JSON with ``--json``; any
error is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from shardsched.cli import (
    create,
    dag_commands,
    declare,
    deploy_app,
    edit,
    events,
    export,
    follow,
    hooks,
    importers,
    progress,
    queues,
    render,
    run_commands,
    style,
    time_text,
)
from shardsched.cli.flags import api_flags
from shardsched.cli.handles import job_id_of
from shardsched.cli.http import CliError, endpoint, read_body, request
from shardsched.cli.render import (
    ago,
    changes_table,
    jobs_table,
    more_hint,
    page_args,
    page_query,
    quoted,
    runs_table,
    schedule_text,
    show_job,
    table,
)


def common_flags(with_tz: bool = True) -> argparse.ArgumentParser:
    """The flags every API command takes (``with_tz``: --tz, the zone times are shown in)."""
    common = argparse.ArgumentParser(add_help=False)
    api_flags(common)
    common.add_argument("--json", action="store_true", help="print the API's JSON (-o json)")
    common.add_argument(
        "-o",
        "--output",
        choices=["table", "wide", "json", "yaml", "name"],
        default=None,
        help="table (default), wide (every column, full times), json or yaml (the API's "
        "answer), name (ids only, one a line)",
    )
    if with_tz:
        common.add_argument(
            "--tz", default=None, metavar="ZONE", help="show times in this zone (default: local)"
        )
    common.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour states: auto (a terminal, unless NO_COLOR is set), always, never",
    )
    return common


# --- jobs, runs, dead letter -------------------------------------------------------------


def _jobs(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    api, cmd = args.api, args.jobs_command
    if cmd == "create":
        return create.run_create(args)
    if cmd == "edit":
        return edit.run_edit(args, "job")
    if cmd == "add":
        given = read_body(args.file)
        if isinstance(given, list):  # many: one request each, a bar on a terminal
            made = [
                request(api, "POST", "/api/v1/jobs", b) for b in progress.track(given, "adding")
            ]
            return made, lambda o: "\n".join(
                f"{c['job_id']}  next run {style.when(c['next_run_at'])}" for c in o
            )
        out = request(api, "POST", "/api/v1/jobs", given)
        return out, lambda o: f"{o['job_id']}  next run {style.when(o['next_run_at']) or '-'}"
    if cmd == "list":
        query = {
            "limit": args.limit,
            "cursor": args.cursor,
            "status": args.status,
            "health": args.health,
            "name_prefix": args.name_prefix,
            "include_deleted": "true" if args.include_deleted else None,
            "label": ",".join(f"{k}:{v}" for k, v in args.label or []) or None,
            "recent": 1,  # each job's newest run: its last outcome
        }
        return request(api, "GET", "/api/v1/jobs" + page_query(query)), jobs_table
    if cmd != "restore":  # a deleted job has left the index of names: its id only
        args.job_id = job_id_of(api, args.job_id)
    path = f"/api/v1/jobs/{quoted(args.job_id)}"
    if cmd == "get":
        last = (request(api, "GET", path + "/runs?limit=1")["runs"] or [None])[0]
        if last is not None and last["state"] in ("failed", "dead_letter"):  # and why
            try:
                output = request(api, "GET", f"/api/v1/runs/{quoted(last['run_id'])}/output")
                last["output_tail"] = output["output"][-800:]
            except CliError:  # its output is gone (archived): the exit code says enough
                pass
        return request(api, "GET", path), lambda o: show_job(o, last)
    if cmd == "ticks":
        window = page_query({"since": args.since, "until": args.until, "limit": args.limit})
        return request(api, "GET", path + "/ticks" + window), time_text.ticks_text
    if cmd == "trigger":
        given = {"args": args.run_args, "idempotency_key": args.idempotency_key}
        options = {k: v for k, v in given.items() if v is not None} or None
        out = request(api, "POST", path + "/trigger", options)
        if out.get("repeated"):
            print(f"{out['run_id']}: the key's first run; nothing new", file=sys.stderr)
        if not (args.wait or args.follow):
            return out, lambda o: o["run_id"]
        print(f"triggered {out['run_id']}", file=sys.stderr)
        if args.follow:
            follow.follow_output(api, out["run_id"])
        run = follow.wait_run(api, out["run_id"], args.timeout)
        args.exit_status = follow.exit_status(run)
        return run, lambda o: runs_table([o])
    if cmd == "delete":
        return request(api, "DELETE", path), lambda o: f"{o['job_id']}  {o['status']}"
    if cmd == "restore":
        out = request(api, "POST", path + "/restore")
        return out, lambda o: f"{o['job_id']}  {o['status']}  incarnation {o['incarnation']}"
    if cmd == "pause":
        body: dict[str, Any] = {"status": "paused"}
        if args.reason:
            body["pause_reason"] = args.reason
        if args.until:
            body["paused_until"] = args.until
        return request(api, "PATCH", path, body), lambda o: f"{o['job_id']}  {o['status']}"
    if cmd == "resume":
        body = {"dry_run": True} if args.dry_run else {}
        if args.catchup:
            body["catchup"] = args.catchup
        if args.per_minute:
            body["per_minute"] = args.per_minute
        return request(api, "POST", path + "/resume", body), time_text.resume_text
    if cmd == "changes":
        return request(api, "GET", path + "/changes" + page_query(page_args(args))), changes_table
    if cmd == "next":
        out = request(api, "GET", path + f"/upcoming?count={args.count}")
        return out, time_text.upcoming_text
    if cmd == "stats":
        window = page_query({"since": args.since, "until": args.until})
        return request(api, "GET", path + "/stats" + window), time_text.stats_text
    if cmd == "versions":
        out = request(api, "GET", path + "/versions")
        return out, lambda o: table(
            ["VERSION", "STATUS", "VALID_FROM", "VALID_UNTIL", "BY", "SCHEDULE", "COMMAND"],
            [
                [
                    v["version"],
                    v["status"],
                    style.when(v["valid_from"]),
                    style.when(v["valid_until"]),
                    v.get("changed_by"),
                    schedule_text(v["spec"]["schedule"]) if v["spec"].get("schedule") else None,
                    v["spec"]["command"],
                ]
                for v in o["versions"]
            ],
        )
    keys = ("since", "until", "max_concurrent", "priority", "per_minute")
    body = {k: vars(args)[k] for k in keys if vars(args)[k] is not None}
    if args.only:
        body["only"] = [g.strip() for g in args.only.split(",") if g.strip()]
    if args.dry_run:
        body["dry_run"] = True
    out = request(api, "POST", path + "/backfill", body)
    if args.wait and not args.dry_run:
        follow.wait_window(api, args.job_id, args.since, args.until, out["ticks"], args.timeout)
    return out, time_text.backfill_text


def _dead_letter(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    query = {"limit": args.limit, "cursor": args.cursor}
    out = request(args.api, "GET", "/api/v1/dead-letter" + page_query(query))
    return out, lambda o: runs_table(o["runs"], across=True) + more_hint(o)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    common = common_flags()

    def page(p: argparse.ArgumentParser, limit: int) -> None:
        p.add_argument("--limit", type=int, default=limit)
        p.add_argument("--cursor", default=None, help="next_cursor of the previous page")

    jobs = sub.add_parser("jobs", help="register, inspect, pause/resume/delete, trigger jobs")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True)
    create.add_create_parser(jsub, common_flags(with_tz=False))
    add = jsub.add_parser("add", parents=[common], help="register a job from a JSON or YAML file")
    add.add_argument(
        "file", help="the job as JSON (POST /api/v1/jobs body), or a list of them; - for stdin"
    )
    lst = jsub.add_parser("list", parents=[common], help="jobs, newest first")
    page(lst, 50)
    lst.add_argument("--status", choices=["active", "paused", "deleted"])
    follow.watch_flag(lst)
    lst.add_argument(
        "--health", choices=["failing", "late"],
        help="failing: its newest run failed for good; late: its next fire over a minute due",
    )  # fmt: skip
    lst.add_argument("--name-prefix", default=None)
    lst.add_argument("--include-deleted", action="store_true", help="deleted jobs too")
    lst.add_argument("--label", type=create.key_value, action="append", metavar="KEY=VALUE",
                     help="only jobs with this label (repeat: all of them)")  # fmt: skip
    for name, text in [
        ("get", "a job"),
        ("delete", "delete, keeping history"),
        ("restore", "bring a deleted job back (its last definition) as a new incarnation"),
        ("versions", "the job's definitions over time"),
        ("edit", "change it in $EDITOR (YAML), applied as a new version with If-Match"),
    ]:
        jsub.add_parser(name, parents=[common], help=text).add_argument("job_id")
    resume = jsub.add_parser(
        "resume", parents=[common], help="resume a paused job (by default its next fire from now)"
    )
    resume.add_argument("job_id")
    resume.add_argument(
        "--catchup", choices=["skip", "latest", "all", "paced"],
        help="the ticks its pause went over: none, the latest, all, or all at most"
        " --per-minute a minute (default: its on_resume)",
    )  # fmt: skip
    resume.add_argument("--per-minute", type=int, metavar="N", help="paced: N a minute (60)")
    resume.add_argument("--dry-run", action="store_true", help="list what would run")
    ticks = jsub.add_parser(
        "ticks", parents=[common],
        help="its ticks over a window and what became of each: fired (and how its run ended),"
        " skipped and why, missed",
    )  # fmt: skip
    ticks.add_argument("job_id")
    ticks.add_argument("--since", type=ago, default=None, help="default: since it was created")
    ticks.add_argument("--until", type=ago, default=None, help="default: now")
    ticks.add_argument("--limit", type=int, default=100)
    stats = jsub.add_parser(
        "stats", parents=[common], help="its ticks counted: fired, late, skipped, missed"
    )
    stats.add_argument("job_id")
    stats.add_argument("--since", type=ago, default=None, help="default: a day ago")
    stats.add_argument("--until", type=ago, default=None, help="default: now")
    upcoming = jsub.add_parser(
        "next", parents=[common],
        help="its next fire times as it will fire them (its phase, window, calendars,"
        " fires left and pause in effect)",
    )  # fmt: skip
    upcoming.add_argument("job_id")
    upcoming.add_argument("-n", "--count", type=int, default=10, help="how many (10)")
    trigger = jsub.add_parser("trigger", parents=[common], help="run now; prints the run id")
    trigger.add_argument("job_id")
    create.trigger_flags(trigger)
    trigger.add_argument("--wait", action="store_true", help="until it ends; its exit code")
    trigger.add_argument("-f", "--follow", action="store_true", help="print its output, and wait")
    follow.timeout_flag(trigger)
    jchanges = jsub.add_parser(
        "changes", parents=[common], help="who changed, paused, triggered it, and when"
    )
    jchanges.add_argument("job_id")
    page(jchanges, 50)
    pause = jsub.add_parser("pause", parents=[common], help="pause (optionally until a time)")
    pause.add_argument("job_id")
    pause.add_argument("--reason", default=None)
    pause.add_argument("--until", default=None, metavar="RFC3339", help="resume by itself then")
    backfill = jsub.add_parser("backfill", parents=[common], help="run a window's missing ticks")
    backfill.add_argument("job_id")
    backfill.add_argument("--since", "--start", dest="since", required=True, type=ago,
                          metavar="WHEN", help="RFC 3339, or 2d (ago)")  # fmt: skip
    backfill.add_argument("--until", "--end", dest="until", required=True, type=ago,
                          metavar="WHEN", help="RFC 3339, or 1h (ago)")  # fmt: skip
    backfill.add_argument("--max-concurrent", type=int, default=1)
    backfill.add_argument("--priority", choices=["high", "normal", "low"], default="low")
    backfill.add_argument(
        "--per-minute", type=int, metavar="N", help="paced: at most N of its runs start a minute"
    )
    backfill.add_argument(
        "--only", metavar="GAPS",
        help="only the ticks the ledger shows missing, skipped or failed (comma-separated;"
        " failed ones run again as a new attempt); default: every tick without a run",
    )  # fmt: skip
    backfill.add_argument("--dry-run", action="store_true", help="list what would run")
    backfill.add_argument("--wait", action="store_true", help="until every tick has run")
    follow.timeout_flag(backfill)

    run_commands.add_parser(sub, common, page)

    events.add_parser(sub, common)
    dead = sub.add_parser("dead-letter", parents=[common], help="dead-lettered runs")
    follow.watch_flag(dead)
    page(dead, 50)
    dag_commands.add_parser(sub, common, page)
    declare.add_apply_parser(sub, common)
    export.add_export_parser(sub, common)
    importers.add_import_parser(sub, common)
    deploy_app.add_deploy_parser(sub, common)
    hooks.add_parser(sub, common)
    queues.add_parser(sub, common)


COMMANDS = {
    "jobs": _jobs,
    "runs": run_commands.run,
    "dead-letter": _dead_letter,
    "dags": dag_commands.run,
    "events": events.run,
    "apply": declare.run_apply,
    "export": export.run_export,
    "import": importers.run_import,
    "deploy": deploy_app.run_deploy,
    "hooks": hooks.run,
    "queues": queues.run,
}


def main(args: argparse.Namespace) -> int:
    output = "json" if args.json else (args.output or "table")
    try:
        style.configure(output, args.tz, args.color)
    except ValueError as exc:
        print(f"shardsched: {exc}", file=sys.stderr)
        return 2
    try:
        args.api = endpoint(args.api, args.token_file, getattr(args, "profile", None))
        if getattr(args, "watch_list", False):
            return follow.watch(lambda: COMMANDS[args.command](args), args.api, output)
        out, show = COMMANDS[args.command](args)
    except follow.TimedOut as exc:
        print(f"shardsched: {exc}", file=sys.stderr)
        return follow.TIMED_OUT
    except CliError as exc:
        print(f"shardsched: {exc}", file=sys.stderr)
        return 1
    if out is not None:  # None: a --follow that printed as it went
        print(render.formatted(out, output, show))
    return int(getattr(args, "exit_status", 0))
