"""``shardsched events tail``: run state changes, oldest first, from --since or the oldest
kept, and with --follow every new one as it comes (polled) until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from shardsched.cli import style
from shardsched.cli.http import request
from shardsched.cli.render import ago, page_query, table


def _event_rows(events: list[dict]) -> list[list[Any]]:
    return [
        [
            style.clock(e["at"]),
            e["run_id"],
            f"{e['old'] or '-'} -> {e['new']}",
            e["worker"],
            e["detail"],
        ]
        for e in events
    ]


EVENT_HEADER = ["AT", "RUN_ID", "CHANGE", "WORKER", "DETAIL"]


def run(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    """``events tail``: the events so far (from --since or the oldest kept), then with
    --follow every new one as it comes (polled), until Ctrl-C."""
    query = {
        "limit": args.limit,
        "job_id": args.job,
        "run_id": args.run,
        "state": args.state,
        "since": args.since,
        "after": args.after,
    }
    out = request(args.api, "GET", "/api/v1/events" + page_query(query))
    if not args.follow:

        def show(o: Any) -> str:
            full = len(o["events"]) == args.limit and o.get("next_cursor")
            more = f"\n(more: --after {o['next_cursor']})" if full else ""
            return table(EVENT_HEADER, _event_rows(o["events"])) + more

        return out, show
    import time

    rows = _event_rows(out["events"])  # a live tail with nothing yet: just the header
    print(table(EVENT_HEADER, rows, empty=None) if not args.json else "", flush=True)
    cursor = out["next_cursor"]
    try:
        while True:
            query = {**query, "since": None, "after": cursor} if cursor else query
            page = request(args.api, "GET", "/api/v1/events" + page_query(query))
            for e in page["events"]:
                row = _event_rows([e])[0]
                print(json.dumps(e) if args.json else "  ".join(str(c or "-") for c in row))
            sys.stdout.flush()
            cursor = page["next_cursor"] or cursor
            if not page["events"]:
                time.sleep(0.5)
    except KeyboardInterrupt:
        return None, lambda o: ""


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    events = sub.add_parser("events", help="the stream of run state changes")
    esub = events.add_subparsers(dest="events_command", required=True)
    tail = esub.add_parser("tail", parents=[common], help="state changes, oldest first")
    tail.add_argument("--job", default=None, metavar="JOB_ID", help="a job's (or a DAG's)")
    tail.add_argument("--run", default=None, metavar="RUN_ID")
    tail.add_argument("--state", default=None, help="only changes to this state")
    tail.add_argument(
        "--since", default=None, type=ago, metavar="WHEN", help="RFC 3339, or 1h (ago)"
    )
    tail.add_argument("--after", default=None, metavar="CURSOR", help="after this event")
    tail.add_argument("--limit", type=int, default=50)
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new ones")
