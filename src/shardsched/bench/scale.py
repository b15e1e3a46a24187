"""``shardsched bench scale``: the burst with 1, 2, 4 node processes x 1, 2, 4 workers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shardsched.bench import burst


def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    for nodes in args.node_counts:
        for workers in args.worker_counts:
            ns = argparse.Namespace(
                redis=args.redis,
                jobs=args.jobs,
                mode="once",
                job_command="noop",
                fsync=args.fsync,
                nodes=nodes,
                workers=workers,
                concurrency=args.concurrency,
                queues=1,
                keys=0,
                shards=64,
                timeout=180.0,
                no_floor=True,
                json=None,
                plot=None,
                profile=None,
                lead=args.lead,
            )
            result = burst.run(ns)
            rows.append(
                {
                    "nodes": nodes,
                    "workers": workers,
                    "all_triggered_s": result["all_triggered_s"],
                    "all_started_s": result["all_started_s"],
                    "all_completed_s": result["all_completed_s"],
                    "trigger_p99_s": result["trigger_lag_s"]["p99"],
                }
            )
    lines = [
        f"scale: {args.jobs}-job burst, fsync {args.fsync} (seconds after the instant)",
        "| nodes | workers | all created | all started | all completed | trigger p99 |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['nodes']} | {row['workers']} | {row['all_triggered_s']} | "
            f"{row['all_started_s']} | {row['all_completed_s']} | {row['trigger_p99_s']} |"
        )
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scale", help="the burst over node and worker process counts")
    p.add_argument("--redis", default=None)
    p.add_argument("--jobs", type=int, default=25_000)
    p.add_argument("--nodes", dest="node_counts", type=_ints, default=[1, 2, 4])
    p.add_argument("--workers", dest="worker_counts", type=_ints, default=[1, 2, 4])
    p.add_argument("--concurrency", type=int, default=1000)
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="always")
    p.add_argument("--lead", type=float, default=8.0)
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
