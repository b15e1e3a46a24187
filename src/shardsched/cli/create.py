"""``shardsched jobs create NAME --cron … | --every … | --at …``: a job from flags, the
common fields as people type them (``--timeout 20m``, ``--every 1h30m``), so the usual
job needs no JSON file. Anything more goes in a file for ``jobs add`` or ``apply``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from shardsched.cli import style
from shardsched.cli.http import CliError, request
from shardsched.core.durations import parse_duration


def duration_arg(text: str) -> float:
    """An argparse type: a duration as people write it (20m, 1h30m), in seconds."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def json_object_arg(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object (``--args '{"day": "2026-01-01"}'``)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("args are a JSON object: {...}")
    return value


def trigger_flags(p: argparse.ArgumentParser) -> None:
    """``jobs trigger``'s options: the run's args and an idempotency key."""
    p.add_argument(
        "--args", dest="run_args", type=json_object_arg, metavar="JSON",
        help="this run's args instead of the job's",
    )  # fmt: skip
    p.add_argument(
        "--idempotency-key", metavar="KEY",
        help="a second trigger with KEY within a day makes no run: prints the first's id",
    )  # fmt: skip


def key_value(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def body_of(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /api/v1/jobs body the flags describe."""
    given = [f for f in ("cron", "every", "at") if getattr(args, f) is not None]
    if len(given) != 1:
        raise CliError("give exactly one schedule: --cron EXPR, --every DURATION or --at TIME")
    schedule: dict[str, Any]
    dst = {k: v for k, v in (("gap", args.dst_gap), ("repeat", args.dst_repeat)) if v}
    if args.cron is not None:
        crons = [
            {"type": "cron", "expression": expr, "timezone": args.cron_tz or "UTC"}
            for expr in args.cron
        ]
        for cron in crons if dst else []:
            cron["dst"] = dst
        for cron in crons if args.cron_dialect else []:
            cron["dialect"] = args.cron_dialect
        schedule = crons[0] if len(crons) == 1 else {"type": "multi", "schedules": crons}
    elif args.cron_tz is not None or dst or args.cron_dialect:
        raise CliError(
            "--timezone, --dst-* and --dialect go with --cron (an --every or --at schedule has"
            " no wall clock)"
        )
    elif args.every is not None:
        schedule = {"type": "interval", "every_s": args.every}
    else:
        schedule = {"type": "once", "at": args.at}
    body: dict[str, Any] = {"name": args.name, "command": args.shell_command, "schedule": schedule}
    if args.id is not None:
        body["id"] = args.id
    if args.timeout is not None:
        body["timeout_s"] = args.timeout
    if args.retries is not None:
        policy: dict[str, Any] = {"max_attempts": args.retries + 1}
        if args.backoff is not None:
            policy["base_s"] = args.backoff
            policy["max_s"] = max(args.backoff, 3600.0)
        body["retry_policy"] = policy
    elif args.backoff is not None:
        raise CliError("--backoff goes with --retries")
    for flag in ("catchup", "overlap"):
        if getattr(args, flag) is not None:
            body[flag] = getattr(args, flag)
    if args.env:
        body["env"] = dict(args.env)
    if args.label:
        body["labels"] = dict(args.label)
    if args.job_args is not None:
        body["args"] = args.job_args
    if args.queue is not None:
        body["queue"] = args.queue
    if args.priority is not None:
        body["priority"] = args.priority
    if args.concurrency_key is not None:
        body["concurrency_key"] = args.concurrency_key
    if args.concurrency_limit is not None:
        body["concurrency_limit"] = args.concurrency_limit
    if args.spread is not None:
        body["spread_s"] = args.spread
    for flag in ("starts_at", "ends_at", "max_fires"):
        if getattr(args, flag) is not None:
            body[flag] = getattr(args, flag)
    for flag in ("start_deadline", "finish_deadline", "expect_success_within"):
        if getattr(args, flag) is not None:
            body[flag + "_s"] = getattr(args, flag)
    if args.skip_late_start:
        body["skip_late_start"] = True
    if args.catchup_per_minute is not None:
        body["catchup_per_minute"] = args.catchup_per_minute
    if args.calendar_include or args.calendar_exclude:
        body["calendars"] = {"include": args.calendar_include, "exclude": args.calendar_exclude}
    return body


def run_create(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    path = "/api/v1/jobs" + ("" if args.allow_duplicate_name else "?unique_name=true")
    out = request(args.api, "POST", path, body_of(args))
    return out, lambda o: f"{o['job_id']}  next run {style.when(o['next_run_at']) or '-'}"


def add_create_parser(jsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = jsub.add_parser(
        "create",
        parents=[common],  # without --tz: here it is the cron's zone (times show in it too)
        help="register a job from flags: jobs create NAME --cron '0 3 * * *' --command CMD",
    )
    p.set_defaults(tz=None)  # times are shown in the global --tz; never the cron's zone
    p.add_argument("name", help="the job's name: a handle other commands take in its id's place")
    p.add_argument(
        "--allow-duplicate-name",
        action="store_true",
        help="make it even if a job has this name (commands then need an id to tell them apart)",
    )
    p.add_argument(  # dest: ``command`` is the top-level command's name
        "--command", dest="shell_command", metavar="CMD", required=True, help="what it runs (sh -c)"
    )
    when = p.add_argument_group("schedule (exactly one)")
    when.add_argument(
        "--cron", metavar="EXPR", action="append",
        help="a 5-field cron expression, or @hourly, @daily, @weekly… (again: it fires at"
        " every tick of any of them)",
    )  # fmt: skip
    when.add_argument(
        "--timezone", "--tz", dest="cron_tz", metavar="ZONE",
        help="the cron's time zone (default UTC); `shardsched --tz ZONE` before the command"
        " only shows times in ZONE",
    )  # fmt: skip
    when.add_argument(
        "--dst-gap", choices=["shift", "end", "skip"],
        help="a wall time the clock skips in spring: fire it shifted by the gap's size, at the"
        " gap's end, or skip it (default: shift a fixed hour, skip under a wildcard hour)",
    )  # fmt: skip
    when.add_argument(
        "--dialect", dest="cron_dialect", choices=["shardsched", "debian"],
        help="whose cron rules: debian gives the times Debian cron gave (a */n day field ANDs,"
        " a gap's matches fire at its end, a * minute is a wildcard too)",
    )  # fmt: skip
    when.add_argument(
        "--dst-repeat", choices=["first", "second", "both"],
        help="a wall time the clock shows twice in autumn: fire its first, its second or both"
        " (default: first for a fixed hour, both under a wildcard hour)",
    )  # fmt: skip
    when.add_argument("--every", type=duration_arg, metavar="DURATION", help="e.g. 90s, 20m, 1h30m")
    when.add_argument("--at", metavar="RFC3339", help="once, at this time")
    p.add_argument(
        "--spread", type=duration_arg, metavar="DURATION",
        help="run each tick at the job's own stable offset within DURATION after it (e.g. 1m)",
    )  # fmt: skip
    p.add_argument("--starts-at", metavar="RFC3339", help="no tick before (its window's start)")
    p.add_argument("--ends-at", metavar="RFC3339", help="no tick after (its window's end)")
    p.add_argument("--max-fires", type=int, metavar="N", help="stop after N fires")
    p.add_argument(
        "--start-deadline", type=duration_arg, metavar="DURATION",
        help="a run not started this long after its tick is flagged (deadline_missed)",
    )  # fmt: skip
    p.add_argument(
        "--skip-late-start", action="store_true",
        help="with --start-deadline: skip a run not started in time instead",
    )  # fmt: skip
    p.add_argument(
        "--finish-deadline", type=duration_arg, metavar="DURATION",
        help="a run not finished this long after its tick is flagged (deadline_missed)",
    )  # fmt: skip
    p.add_argument(
        "--expect-success-within", type=duration_arg, metavar="DURATION",
        help="a dead-man's switch: say so when no run succeeded for this long",
    )  # fmt: skip
    p.add_argument(
        "--calendar-include", action="append", default=[], metavar="NAME",
        help="fire only on a day of one of these calendars (shardsched calendars)",
    )  # fmt: skip
    p.add_argument(
        "--calendar-exclude", action="append", default=[], metavar="NAME",
        help="never fire on a day of this calendar (a tick then is skipped, 'calendar')",
    )  # fmt: skip
    p.add_argument("--id", help="its id (default: a random job_…)")
    p.add_argument("--timeout", type=duration_arg, metavar="DURATION", help="default 1h")
    p.add_argument("--retries", type=int, metavar="N", help="attempts after the first fails")
    p.add_argument("--backoff", type=duration_arg, metavar="DURATION", help="first retry delay")
    p.add_argument("--catchup", choices=["all", "latest", "none", "paced"])
    p.add_argument(
        "--catchup-per-minute", type=int, metavar="N",
        help="catchup paced (and a paced resume): owed ticks started a minute (default 60)",
    )  # fmt: skip
    p.add_argument(
        "--overlap",
        choices=["allow", "forbid", "replace", "buffer_one", "buffer_all", "cancel_other"],
    )
    p.add_argument("--env", type=key_value, action="append", metavar="KEY=VALUE")
    p.add_argument("--label", type=key_value, action="append", metavar="KEY=VALUE")
    p.add_argument("--queue", metavar="NAME", help="only workers serving it run the job")
    p.add_argument(
        "--priority", choices=["high", "normal", "low"], help="under contention, higher first"
    )
    p.add_argument(
        "--args", dest="job_args", type=json_object_arg, metavar="JSON", help="its runs' args"
    )
    p.add_argument(
        "--concurrency-key",
        metavar="KEY",
        help="runs sharing it are held to its limits; may name labels: 'tenant:{labels.tenant}'",
    )
    p.add_argument(
        "--concurrency-limit", type=int, metavar="N", help="the key's limit unless it has its own"
    )
