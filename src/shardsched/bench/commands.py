"""``shardsched bench commands``: command jobs against the box's own spawn floor.

A command job's cost is mostly the fork/exec of ``/bin/sh``, which differs a lot between
machines, so the figure that carries over is the ratio to a floor measured in the same
sitting: a tight loop spawning ``/bin/sh -c true`` (new session, output to a pipe, waited
for) from this interpreter, on as many threads as there are workers. Each round measures
the floor, then a burst of N ``true`` command jobs due at one instant through a node and
the workers (``bench burst --mode once --command true``, fresh Redis, audited), and the
rounds interleave so drifting load on a shared box hits both alike. The rate of the burst
is taken from its first start to its last completion (what the workers did), and also
quoted from the tick (what a user waits for).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import threading
import time
from pathlib import Path

from shardsched.bench import burst


def spawn_floor(n: int, threads: int) -> float:
    """Spawns per second of ``/bin/sh -c true`` from ``threads`` threads of this process."""

    def loop(count: int) -> None:
        for _ in range(count):
            subprocess.run(
                ["/bin/sh", "-c", "true"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                check=False,
            )

    workers = [threading.Thread(target=loop, args=(n // threads,)) for _ in range(threads)]
    start = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return (n // threads * threads) / (time.perf_counter() - start)


def _burst_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(
        redis=None,
        jobs=args.jobs,
        mode="once",
        job_command="true",
        fsync=args.fsync,
        nodes=1,
        workers=args.workers,
        concurrency=args.concurrency,
        queues=1,
        keys=0,
        shards=64,
        timeout=300.0,
        lead=3.0,
        no_floor=True,
        json=None,
        plot=None,
        profile=None,
        keep_rows=True,
    )


def run(args: argparse.Namespace) -> dict:
    rounds = []
    for i in range(args.rounds):
        floor = spawn_floor(args.floor_spawns, args.workers)
        result = burst.run(_burst_args(args))
        rows = result.pop("rows")
        starts = [r[3] for r in rows if r[3]]
        ends = [r[4] for r in rows if r[4]]
        busy_s = (max(ends) - min(starts)) / 1000
        rate = args.jobs / busy_s
        rounds.append(
            {
                "floor_spawns_per_s": round(floor, 1),
                "jobs_per_s": round(rate, 1),
                "jobs_per_s_from_tick": result["throughput_runs_per_s"],
                "ratio": round(rate / floor, 3),
                "ratio_from_tick": round(result["throughput_runs_per_s"] / floor, 3),
                "succeeded": result["succeeded"],
                "audit": result["audit"],
            }
        )
        r = rounds[-1]
        print(
            f"round {i + 1}: floor {r['floor_spawns_per_s']} spawns/s; command jobs "
            f"{r['jobs_per_s']}/s ({r['ratio']:.0%} of the floor; {r['jobs_per_s_from_tick']}/s "
            f"= {r['ratio_from_tick']:.0%} counted from the tick); succeeded {r['succeeded']}"
        )
    summary = {
        "jobs": args.jobs,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "fsync": args.fsync,
        "rounds": rounds,
        "median_floor_spawns_per_s": round(
            statistics.median(r["floor_spawns_per_s"] for r in rounds), 1
        ),
        "median_jobs_per_s": round(statistics.median(r["jobs_per_s"] for r in rounds), 1),
        "median_ratio": round(statistics.median(r["ratio"] for r in rounds), 3),
        "median_ratio_from_tick": round(statistics.median(r["ratio_from_tick"] for r in rounds), 3),
    }
    print(
        f"commands: {args.jobs} `true` jobs, {args.workers} workers, {args.rounds} rounds: "
        f"median {summary['median_jobs_per_s']} jobs/s against a floor of "
        f"{summary['median_floor_spawns_per_s']} spawns/s = {summary['median_ratio']:.0%} "
        f"({summary['median_ratio_from_tick']:.0%} from the tick)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    bad = [r for r in rounds if r["succeeded"] != args.jobs or r["audit"]["duplicated"]]
    if bad:
        raise SystemExit(f"a round lost or doubled runs: {bad}")
    return summary


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("commands", help="command jobs (/bin/sh -c true) against the spawn floor")
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--floor-spawns", type=int, default=4000)
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="always")
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
