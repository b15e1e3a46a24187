"""``shardsched calendars list|get|set|rm``: named calendars through the API (a write
token not bound to a team changes them). A job names them with ``--calendar-include``
and ``--calendar-exclude``."""

from __future__ import annotations

import argparse
from typing import Any

from shardsched.cli.api import common_flags
from shardsched.cli.http import endpoint, request
from shardsched.cli.render import answer, quoted, table

BASE = "/api/v1/calendars"


def add_parser(sub: argparse._SubParsersAction) -> None:
    common = common_flags()
    cal = sub.add_parser(
        "calendars",
        help="named calendars (holidays, business days) jobs include or exclude",
        description="Sets of days (dates, date ranges, weekdays) kept once and named by"
        " jobs: a tick on a day its job's calendars do not allow is skipped, recorded"
        " 'calendar'. A change applies from the next tick of every job.",
    )
    csub = cal.add_subparsers(dest="calendars_command", required=True)
    csub.add_parser("list", parents=[common], help="every calendar")
    get = csub.add_parser("get", parents=[common], help="one calendar, every day of it")
    get.add_argument("name")
    put = csub.add_parser("set", parents=[common], help="add or replace a calendar")
    put.add_argument("name", help="1-64 of A-Z a-z 0-9 _ . -")
    put.add_argument("--date", action="append", default=[], metavar="YYYY-MM-DD")
    put.add_argument(
        "--range", action="append", default=[], metavar="FROM..TO", dest="ranges",
        help="every day from FROM to TO, both included",
    )  # fmt: skip
    put.add_argument(
        "--weekday", action="append", default=[], metavar="DAY", dest="weekdays",
        choices=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
    )  # fmt: skip
    put.add_argument("--description", default="")
    rm = csub.add_parser("rm", parents=[common], help="remove a calendar")
    rm.add_argument("name")


def _range(text: str) -> dict[str, str]:
    start, dots, end = text.partition("..")
    return {"start": start, "end": end} if dots else {"start": text, "end": text}


def _call(args: argparse.Namespace) -> Any:
    api = endpoint(args.api, args.token_file, getattr(args, "profile", None))
    sub = args.calendars_command
    if sub == "list":
        return request(api, "GET", BASE)
    path = f"{BASE}/{quoted(args.name)}"
    if sub == "get":
        return request(api, "GET", path)
    if sub == "rm":
        return request(api, "DELETE", path)
    body = {
        "dates": args.date,
        "ranges": [_range(r) for r in args.ranges],
        "weekdays": args.weekdays,
        "description": args.description,
    }
    return request(api, "PUT", path, body)


def _days(c: dict[str, Any]) -> str:
    parts = [*c["weekdays"], *(f"{r['start']}..{r['end']}" for r in c["ranges"])]
    dates = c["dates"]
    parts += dates[:5] + ([f"(+{len(dates) - 5} dates)"] if len(dates) > 5 else [])
    return " ".join(parts) or "(no day)"


def _show(args: argparse.Namespace, out: Any) -> str:
    if "removed" in out:
        return f"removed {out['removed']}"
    if "calendars" in out:
        rows = [[c["name"], _days(c), c["description"]] for c in out["calendars"]]
        return table(["NAME", "DAYS", "DESCRIPTION"], rows)
    if args.calendars_command == "get":
        lines = [f"{out['name']}: {out['description']}".rstrip(": ")]
        lines += [f"  weekdays {' '.join(out['weekdays'])}"] if out["weekdays"] else []
        lines += [f"  range {r['start']}..{r['end']}" for r in out["ranges"]]
        lines += [f"  date {d}" for d in out["dates"]]
        return "\n".join(lines)
    return f"calendar {out['name']} set: {_days(out)}"


def main(args: argparse.Namespace) -> int:
    return answer(args, lambda: _call(args), lambda out: _show(args, out))
