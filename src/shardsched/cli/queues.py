"""``shardsched queues backlog``: each queue's default backpressure (docs/events.md), or one
queue's set (``--policy skip --max-queued 5``) or cleared (``--clear``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from shardsched.cli.http import CliError, request
from shardsched.cli.render import table


def run(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    if args.queue is None:
        if args.policy or args.clear:
            raise CliError("name the queue to set or clear its default: queues backlog QUEUE")
        return request(args.api, "GET", "/api/v1/queues/backlog"), _table
    path = f"/api/v1/queues/{quote(args.queue, safe='')}/backlog"
    if args.clear:
        return request(args.api, "DELETE", path), _table
    if not args.policy:
        raise CliError(
            "give --policy queue|skip|coalesce (with --max-queued or --max-age), or --clear"
        )
    body: dict[str, Any] = {"policy": args.policy}
    if args.max_queued is not None:
        body["max_queued"] = args.max_queued
    if args.max_age is not None:
        body["max_age_s"] = args.max_age
    return request(args.api, "PUT", path, body), _table


def _table(out: dict[str, Any]) -> str:
    rows = [
        [q, p["policy"], p.get("max_queued"), p.get("max_age_s")] for q, p in out["queues"].items()
    ]
    return table(["QUEUE", "POLICY", "MAX_QUEUED", "MAX_AGE_S"], rows, empty="no queue has one")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    queues = sub.add_parser("queues", help="queues' default backpressure")
    qsub = queues.add_subparsers(dest="queues_command", required=True)
    backlog = qsub.add_parser("backlog", parents=[common], help="list, set or clear a default")
    backlog.add_argument("queue", nargs="?", default=None)
    backlog.add_argument("--policy", choices=("queue", "skip", "coalesce"), default=None)
    backlog.add_argument("--max-queued", type=int, default=None, metavar="N")
    backlog.add_argument("--max-age", type=float, default=None, metavar="SECONDS")
    backlog.add_argument("--clear", action="store_true")
