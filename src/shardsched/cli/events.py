"""``shardsched events``: ``tail`` the run state changes, oldest first, from --since or
the oldest kept, and with --follow every new one as it comes (polled) until Ctrl-C;
``emit`` an event to the jobs that listen (core/events.py), ``show`` one received with
its outcome, and list those ``received``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from shardsched.cli import style
from shardsched.cli.http import CliError, request
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
    if args.events_command == "emit":
        return _emit(args)
    if args.events_command == "show":
        path = f"/api/v1/events/{quote(args.event_id, safe='')}"
        return request(args.api, "GET", path), show_event
    if args.events_command == "received":
        query = {"limit": args.limit, "name": args.name, "before": args.before}
        out = request(args.api, "GET", "/api/v1/events/received" + page_query(query))
        return out, _received_table
    return _tail(args)


def _emit(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    body: dict[str, Any] = {}
    if args.payload is not None:
        try:
            body["payload"] = json.loads(args.payload)
        except ValueError as exc:
            raise CliError(f"--payload is not JSON: {exc}") from None
    if args.key:
        body["idempotency_key"] = args.key
    path = f"/api/v1/events/{quote(args.name, safe='')}"
    return request(args.api, "POST", path, body), show_event


def show_event(e: dict[str, Any]) -> str:
    """An event and its outcome, one line per delivery."""
    o = e["outcome"]
    lines = [
        f"event    {e['event_id']}  {e['name']}  from {e['source']}",
        f"received {style.clock(e['received_at'])}"
        + (f"  key {e['idempotency_key']}" if e.get("idempotency_key") else ""),
        f"outcome  {o['outcome'] if o else 'pending'}"
        + (f"  ({o['reason']})" if o and o.get("reason") else ""),
    ]
    for d in (o or {}).get("deliveries", []):
        said = d.get("run_id") or d.get("reason") or ""
        first = f"  (first: {d['first_event_id']})" if d.get("first_event_id") else ""
        lines.append(f"  {d['job_id']}  {d['result']}  {said}{first}")
    for job_id, what in e.get("later", {}).items():
        lines.append(f"  later {job_id}: {what}")
    return "\n".join(lines)


def _received_table(out: dict[str, Any]) -> str:
    rows = [
        [style.clock(e["received_at"]), e["event_id"], e["name"], e["source"],
         e["outcome"]["outcome"] if e["outcome"] else "pending"]
        for e in out["events"]
    ]  # fmt: skip
    more = f"\n(more: --before {out['next_cursor']})" if out.get("next_cursor") else ""
    return table(["RECEIVED", "EVENT_ID", "NAME", "SOURCE", "OUTCOME"], rows) + more


def _tail(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
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
    events = sub.add_parser("events", help="run state changes; events emitted and received")
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
    emit = esub.add_parser("emit", parents=[common], help="emit an event to the jobs that listen")
    emit.add_argument("name", help="the event's name, e.g. cms.published")
    emit.add_argument("--payload", default=None, metavar="JSON", help="its payload (JSON)")
    emit.add_argument("--key", default=None, help="its idempotency key (a day, per job)")
    show = esub.add_parser("show", parents=[common], help="an event received, its outcome")
    show.add_argument("event_id")
    got = esub.add_parser("received", parents=[common], help="events received, newest first")
    got.add_argument("--name", default=None, help="this event's only")
    got.add_argument("--before", default=None, metavar="CURSOR", help="the next page")
    got.add_argument("--limit", type=int, default=50)
