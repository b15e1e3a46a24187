"""``shardsched bench register``: how fast the SDK registers jobs in bulk (pipelined)."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from shardsched.bench.harness import bench_redis
from shardsched.core.models import CronSchedule, JobSpec
from shardsched.sdk import Client


def run(args: argparse.Namespace) -> dict:
    rates = []
    with bench_redis(args.redis, args.fsync) as url:
        for i in range(args.repeat):
            client = Client(url, f"register{int(time.time() * 1000) % 10**9}-{i}")
            specs = [
                JobSpec(name=f"r{n}", schedule=CronSchedule(expression="0 3 * * *"), command="true")
                for n in range(args.jobs)
            ]
            start = time.perf_counter()
            client.add_jobs(specs, batch=args.batch)
            rates.append(args.jobs / (time.perf_counter() - start))
            client.close()
    result = {
        "jobs": args.jobs,
        "batch": args.batch,
        "fsync": args.fsync,
        "rates_jobs_per_s": [round(r) for r in rates],
        "median_jobs_per_s": round(statistics.median(rates)),
    }
    print(
        f"register: {args.jobs} jobs per run, batch {args.batch}, fsync {args.fsync}: "
        f"median {result['median_jobs_per_s']} jobs/s over {args.repeat} runs "
        f"{result['rates_jobs_per_s']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("register", help="SDK bulk registration rate")
    p.add_argument("--redis", default=None)
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="always")
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
