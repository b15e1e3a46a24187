"""``shardsched runs …``: a job's runs, what is under way across jobs, the failure inbox,
a run's output, and the control over a run (retry a dead letter, cancel), over the HTTP
API (see :mod:`.api` for the flags every command shares)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from shardsched.cli import follow
from shardsched.cli.create import key_value
from shardsched.cli.handles import job_id_of
from shardsched.cli.http import CliError, request
from shardsched.cli.render import (
    ago,
    more_hint,
    page_args,
    page_query,
    quoted,
    runs_table,
    show_run,
)

#: The states ``runs list`` lists across jobs (without a job id).
UNDER_WAY = ("running", "queued", "waiting", "retrying")


def run(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    api, cmd = args.api, args.runs_command
    if cmd == "list":
        if args.job_id is None:
            return _under_way(args)
        query = {**page_args(args), "state": args.state, "since": args.since, "until": args.until}
        job_id = job_id_of(api, args.job_id)
        out = request(api, "GET", f"/api/v1/jobs/{quoted(job_id)}/runs" + page_query(query))
        return out, lambda o: runs_table(o["runs"]) + more_hint(o)
    if cmd == "failed":
        query = {
            "limit": args.limit,
            "cursor": args.cursor,
            "state": args.state,
            "since": ago(args.since),
            "until": ago(args.until),
            "name_prefix": args.name_prefix,
        }
        out = request(api, "GET", "/api/v1/runs" + page_query(query))
        return out, lambda o: runs_table(o["runs"], across=True) + more_hint(o)
    if cmd == "retry":
        return _retry(args)
    path = f"/api/v1/runs/{quoted(args.run_id)}"
    if cmd == "get":
        return request(api, "GET", path), show_run
    if cmd == "wait":
        run_ = follow.wait_run(api, args.run_id, args.timeout)
        args.exit_status = follow.exit_status(run_)
        return run_, lambda o: runs_table([o])
    if cmd == "output" and args.follow:
        follow.follow_output(api, args.run_id)
        return None, lambda o: ""
    if cmd == "output":
        return request(api, "GET", path + "/output"), lambda o: o["output"].rstrip("\n")
    if cmd == "cancel":
        body = {"reason": args.reason} if args.reason else None
        return request(api, "POST", path + "/cancel", body), lambda o: runs_table([o])
    raise CliError(f"runs {cmd}: no such command")


def _retry(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    ids = args.run_ids
    filtered = args.since or args.until or args.name_prefix or args.all
    if len(ids) == 1 and not filtered and not args.dry_run:
        path = f"/api/v1/runs/{quoted(ids[0])}/retry"
        return request(args.api, "POST", path), lambda o: runs_table([o])
    if bool(ids) == bool(filtered):
        raise CliError(
            "retry RUN_ID..., or every dead letter matching --since/--until/--name-prefix"
            " (--all: every one), not both"
        )
    body: dict[str, Any] = {"dry_run": args.dry_run}
    if ids:
        body["run_ids"] = ids
    else:
        body.update(since=args.since, until=args.until, name_prefix=args.name_prefix)
    out = request(
        args.api,
        "POST",
        "/api/v1/dead-letter/retry",
        {k: v for k, v in body.items() if v is not None},
    )

    def show(o: Any) -> str:
        lines = [f"would retry {rid}" for rid in o["would_retry"]]
        lines += [f"retried {r['run_id']}" for r in o["retried"]]
        lines += [f"refused {x['run_id']}: {x['reason']}" for x in o["refused"]]
        done = len(o["would_retry"]) if o["dry_run"] else len(o["retried"])
        verb = "would retry" if o["dry_run"] else "retried"
        lines.append(
            f"{verb} {done}, refused {len(o['refused'])}"
            + (" (dry run: nothing written)" if o["dry_run"] else "")
        )
        return "\n".join(lines)

    if out["refused"] and not out["retried"] and not out["would_retry"]:
        args.exit_status = 1
    return out, show


def _under_way(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    """Runs under way across jobs: of one state, or (no --state) of every state under way,
    one page each, merged."""
    if args.state is not None and args.state not in UNDER_WAY:
        raise CliError(
            "runs list without a JOB_ID lists runs under way: --state "
            + "|".join(UNDER_WAY)
            + " (failed ones: runs failed)"
        )
    query = {
        **page_args(args),
        "job": args.job,
        "queue": args.queue,
        "worker": args.worker,
        "label": ",".join(f"{k}:{v}" for k, v in args.label or []) or None,
    }
    states = [args.state] if args.state else list(UNDER_WAY)
    pages = [
        request(args.api, "GET", "/api/v1/runs" + page_query({**query, "state": state}))
        for state in states
    ]
    out = {"runs": [r for p in pages for r in p["runs"]]}
    if len(pages) == 1:
        out = pages[0]
    return out, lambda o: runs_table(o["runs"], across=True) + more_hint(o)


def add_parser(
    sub: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
    page: Callable[[argparse.ArgumentParser, int], None],
) -> None:
    runs = sub.add_parser("runs", help="inspect runs, read their output, retry or cancel them")
    rsub = runs.add_subparsers(dest="runs_command", required=True)
    rlist = rsub.add_parser(
        "list", parents=[common],
        help="a job's runs, newest first; without JOB_ID, runs under way across jobs",
    )  # fmt: skip
    rlist.add_argument("job_id", nargs="?", default=None)
    follow.watch_flag(rlist)
    page(rlist, 50)
    rlist.add_argument(
        "--state", default=None,
        help="a state; without JOB_ID one of " + ", ".join(UNDER_WAY),
    )  # fmt: skip
    rlist.add_argument(
        "--since", default=None, type=ago, metavar="WHEN", help="RFC 3339, or 1h (ago)"
    )
    rlist.add_argument(
        "--until", default=None, type=ago, metavar="WHEN", help="RFC 3339, or 10m (ago)"
    )
    rlist.add_argument("--job", default=None, metavar="JOB_ID", help="under way: a job's (a DAG's)")
    rlist.add_argument("--queue", default=None, help="under way: on this queue")
    rlist.add_argument("--worker", default=None, metavar="WORKER_ID", help="under way: held by it")
    rlist.add_argument("--label", type=key_value, action="append", metavar="KEY=VALUE",
                       help="under way: of jobs with this label (repeat: all)")  # fmt: skip
    failed = rsub.add_parser(
        "failed", parents=[common], help="failed and dead-lettered runs of every job, latest first"
    )
    page(failed, 50)
    follow.watch_flag(failed)
    failed.add_argument("--since", default=None, metavar="WHEN", help="RFC 3339, or 1h (ago)")
    failed.add_argument("--until", default=None, metavar="WHEN", help="RFC 3339, or 10m (ago)")
    failed.add_argument("--state", choices=["failed", "dead_letter"], default=None)
    failed.add_argument("--name-prefix", default=None, help="of jobs (or DAGs) named so")
    rsub.add_parser("get", parents=[common], help="a run").add_argument("run_id")
    retry = rsub.add_parser(
        "retry", parents=[common],
        help="send dead-lettered runs back: those named, or all matching a filter",
    )  # fmt: skip
    retry.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    retry.add_argument("--since", type=ago, metavar="WHEN", help="dead-lettered since (1h: ago)")
    retry.add_argument("--until", type=ago, metavar="WHEN", help="dead-lettered until")
    retry.add_argument("--name-prefix", help="of jobs (or DAGs) named so")
    retry.add_argument("--all", action="store_true", help="every dead letter (no filter)")
    retry.add_argument("--dry-run", action="store_true", help="say what it would retry")
    cancel = rsub.add_parser(
        "cancel", parents=[common],
        help="cancel a queued, waiting, retrying or running run (not retried)",
    )  # fmt: skip
    cancel.add_argument("run_id")
    cancel.add_argument("--reason", default=None, help="why (recorded with who)")
    output = rsub.add_parser("output", parents=[common], help="what a run printed (last 64 KiB)")
    output.add_argument("run_id")
    output.add_argument("-f", "--follow", action="store_true", help="stream it until it ends")
    wait = rsub.add_parser(
        "wait", parents=[common], help="until it ends (through retries); exit with its exit code"
    )
    wait.add_argument("run_id")
    follow.timeout_flag(wait)
