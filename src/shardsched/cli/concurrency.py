"""``shardsched concurrency list|get|set|clear``: concurrency keys' limits and what waits
on them, through the API (core/concurrency.py). ``set`` says the whole of a key's limits:
``--limit 3 --rate 10/60`` (at most 3 at once, at most 10 starts in any 60 s); what it
leaves out is cleared. Each change is live at the next start and recorded."""

from __future__ import annotations

import argparse
from typing import Any

from shardsched.cli.api import common_flags
from shardsched.cli.http import CliError, endpoint, request
from shardsched.cli.render import answer, quoted, table


def _rate(text: str) -> dict[str, Any]:
    starts, slash, per = text.partition("/")
    try:
        if not slash:
            raise ValueError
        return {"max": int(starts), "per_s": float(per)}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not STARTS/SECONDS (e.g. 10/60: at most 10 starts in any 60 s)"
        ) from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    common = common_flags()
    parser = sub.add_parser(
        "concurrency",
        help="concurrency keys: limits, rates, running and waiting runs",
        description="Concurrency keys' limits and what waits on them. `set` says the whole of a"
        " key's limits: --limit 3 --rate 10/60 (at most 3 at once, at most 10 starts in any"
        " 60 s); what it leaves out is cleared. Each change is live at the next start and"
        " recorded.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    csub = parser.add_subparsers(dest="concurrency_command", required=True)
    csub.add_parser("list", parents=[common], help="keys with limits or waiting runs")
    get = csub.add_parser("get", parents=[common], help="one key, with its change log")
    get.add_argument("key")
    put = csub.add_parser("set", parents=[common], help="set a key's limits (live)")
    put.add_argument("key")
    put.add_argument("--limit", type=int, metavar="N", help="runs at once at most")
    put.add_argument(
        "--rate", type=_rate, metavar="STARTS/SECONDS", help="starts per interval at most"
    )
    clear = csub.add_parser("clear", parents=[common], help="remove a key's own limits")
    clear.add_argument("key")


def _call(args: argparse.Namespace) -> Any:
    api = endpoint(args.api, args.token_file, getattr(args, "profile", None))
    cmd = args.concurrency_command
    if cmd == "list":
        return request(api, "GET", "/api/v1/concurrency")
    path = f"/api/v1/concurrency/{quoted(args.key)}"
    if cmd == "get":
        return request(api, "GET", path)
    if cmd == "clear":
        return request(api, "DELETE", path)
    if args.limit is None and args.rate is None:
        raise CliError("say --limit, --rate or both (clear removes a key's limits)")
    body = {k: v for k, v in (("limit", args.limit), ("rate", args.rate)) if v is not None}
    return request(api, "PUT", path, body)


def _rate_text(view: dict[str, Any]) -> str | None:
    rate = view.get("rate")
    return None if rate is None else f"{rate['max']}/{rate['per_s']:g}s"


def _row(view: dict[str, Any]) -> list[Any]:
    limit = view.get("limit")
    if limit is None and view.get("job_limit") is not None:
        limit = f"{view['job_limit']} (jobs')"
    wait = view.get("oldest_wait_s")
    return [
        view["key"],
        limit,
        _rate_text(view),
        view.get("running", 0),
        view.get("waiting", 0),
        None if wait is None else f"{wait:.1f}s",
    ]


_HEADERS = ["KEY", "LIMIT", "RATE", "RUNNING", "WAITING", "OLDEST_WAIT"]


def _show(args: argparse.Namespace, out: Any) -> str:
    if args.concurrency_command == "list":
        return table(_HEADERS, [_row(v) for v in out["keys"]])
    text = table(_HEADERS, [_row(out)])
    for title, runs, total in (
        ("holding it", out.get("holding_runs", []), out.get("running", 0)),
        ("waiting, in order", out.get("waiting_runs", []), out.get("waiting", 0)),
    ):
        more = f" (and {total - len(runs)} more)" if total > len(runs) else ""
        text += f"\n\n{title}:{more}\n" + ("\n".join(f"  {r}" for r in runs) or "  none")
    changes = [
        [c["at"], c["actor"], "cleared" if c.get("cleared") else c.get("limit"), _rate_text(c)]
        for c in out.get("changes", [])
    ]
    return text + "\n\nchanges:\n" + table(["AT", "BY", "LIMIT", "RATE"], changes)


def main(args: argparse.Namespace) -> int:
    return answer(args, lambda: _call(args), lambda out: _show(args, out))
