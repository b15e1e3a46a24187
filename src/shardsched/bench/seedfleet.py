"""``shardsched bench seedfleet``: the seed's fleet of schedules, for a while, at two sizes.

``--sizes 50000,500000`` jobs, each size on a Redis of its own: 5 % every minute
(``* * * * *``: a burst on every :00; with ``--rate``, as many as bring the mean firing
rate to it), 60 % hourly and 35 % daily (``H * * * *`` and ``H H * * *``: each on its
own stable minute, as docs/schedules.md recommends for fleets), handler ``noop``; one node and
``--workers`` workers. For each size: registration rate, Redis memory per job right after
it, then ``--minutes`` of running with the node's and Redis's CPU sampled every
``--sample`` seconds, and the audit's trigger lag of every tick due after the node
started (p50/p99/max) with 0 missing and 0 duplicated. The claim under test: a tick's
cost grows with the fires due, not with the schedules registered, so Redis and node CPU
per firing stay about the same at 10 times the jobs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shardsched.bench import floor
from shardsched.bench.harness import Procs, bench_client, bench_redis, start_ready
from shardsched.core.instants import from_ms
from shardsched.core.models import CronSchedule, JobSpec
from shardsched.ops.history import audit
from shardsched.sdk import Client
from shardsched.store.calls import server_ms

#: the seed's mix beyond its minutely share: hourly and daily, 60 : 35
HOURLY_OF_REST = 60 / 95


def mix(n: int, rate: float | None) -> tuple[int, int, int]:
    """How many of ``n`` jobs are minutely, hourly, daily: the seed's 5 / 60 / 35 %, or
    (``rate``) as many minutely as bring the mean firing rate to ``rate`` a second, the
    rest hourly and daily 60 : 35 (the seed's 72M runs a day from 500,000 jobs is 833/s:
    about 9 % minutely; 50,000 jobs reach it only all minutely)."""
    if rate is None:
        minutely, hourly = n * 5 // 100, n * 60 // 100
        return minutely, hourly, n - minutely - hourly
    rest = HOURLY_OF_REST / 3600 + (1 - HOURLY_OF_REST) / 86400  # a rest job's fires/s
    minutely = max(0, min(n, round((rate - n * rest) / (1 / 60 - rest))))
    hourly = round((n - minutely) * HOURLY_OF_REST)
    return minutely, hourly, n - minutely - hourly


def seed_jobs(n: int, rate: float | None = None) -> Iterator[JobSpec]:
    minutely, hourly, _ = mix(n, rate)
    for i in range(n):
        if i < minutely:
            expression = "* * * * *"
        elif i < minutely + hourly:
            expression = "H * * * *"
        else:
            expression = "H H * * *"
        yield JobSpec(
            name=f"s{i}", schedule=CronSchedule(expression=expression), command="handler:noop"
        )


def measure(args: argparse.Namespace, jobs: int) -> dict[str, Any]:
    with bench_redis(args.redis, args.fsync) as url:
        r = bench_client(url)
        ns = f"seed{jobs}"
        r.hset(f"{ns}:{{g}}:meta", "shards", args.shards)
        client = Client(url, ns)
        mem0 = int(r.info("memory")["used_memory"])
        began = time.monotonic()
        client.add_jobs(seed_jobs(jobs, args.rate), batch=5000)
        register_s = time.monotonic() - began
        mem1 = int(r.info("memory")["used_memory"])
        samples: list[dict[str, float]] = []
        with Procs() as procs:
            common = ("--redis", url, "--namespace", ns)
            start_ready(procs, "node", "node", *common, "--no-http", timeout=300)
            for w in range(args.workers):
                start_ready(procs, f"worker{w}", "worker", *common, "--worker-id", f"w{w}",
                            "--concurrency", "1000")  # fmt: skip
            node_pid = procs.procs["node"].pid
            # ticks due while the jobs were registered waited for the node: not its lag
            started_ms = server_ms(r.time())
            fired0 = _fired(r, client)
            redis0, node0, t0 = floor.redis_cpu(r), floor.cpu_seconds(node_pid), time.monotonic()
            last = (redis0, node0, t0, fired0)
            end = t0 + args.minutes * 60
            while (now := time.monotonic()) < end:
                time.sleep(min(args.sample, end - now))
                cur = (floor.redis_cpu(r), floor.cpu_seconds(node_pid), time.monotonic(),
                       _fired(r, client))  # fmt: skip
                dt = cur[2] - last[2]
                samples.append({
                    "t_s": round(cur[2] - t0, 1),
                    "redis_cpu_s_per_s": round((cur[0] - last[0]) / dt, 4),
                    "node_cpu_s_per_s": round((cur[1] - last[1]) / dt, 4),
                    "fired_per_s": round((cur[3] - last[3]) / dt, 1),
                })  # fmt: skip
                last = cur
            took = last[2] - t0
            redis_s, node_s, fired = last[0] - redis0, last[1] - node0, last[3] - fired0
        report = client._run(
            audit.audit(client.deployment, settle_s=1.0, lag_from=from_ms(started_ms))
        )
        client.close()
    return {
        "jobs": jobs,
        "minutely_hourly_daily": mix(jobs, args.rate),
        "register_jobs_per_s": round(jobs / register_s),
        "redis_bytes_per_job": round((mem1 - mem0) / jobs),
        "minutes": args.minutes,
        "fired": fired,
        "fired_per_s": round(fired / took, 1),
        "redis_cpu_s_per_s": round(redis_s / took, 4),
        "node_cpu_s_per_s": round(node_s / took, 4),
        "redis_cpu_us_per_firing": round(redis_s / max(fired, 1) * 1e6, 1),
        "node_cpu_us_per_firing": round(node_s / max(fired, 1) * 1e6, 1),
        "trigger_lag_s": {
            "p50": report.lag_s.p50,
            "p99": report.lag_s.p99,
            "max": report.lag_s.max,
        },
        "audit": {
            "expected": report.expected,
            "fired": report.fired,
            "missing": report.missing,
            "duplicated": report.duplicated,
        },
        "samples": samples,
    }


def _fired(r: Any, client: Client) -> int:
    dep = client.deployment
    pipe = r.pipeline(transaction=False)
    for s in range(dep.n_shards):
        pipe.hget(dep.shard(s).stats, "fired")
    return sum(int(v or 0) for v in pipe.execute())


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    for size in (int(x) for x in args.sizes.split(",")):
        print(f"seedfleet: {size} jobs for {args.minutes} min…", file=sys.stderr, flush=True)
        res = measure(args, size)
        results.append(res)
        lag = res["trigger_lag_s"]
        print(
            f"{size:>8} jobs: registered {res['register_jobs_per_s']}/s, "
            f"{res['redis_bytes_per_job']} B/job; {res['fired_per_s']} fired/s; Redis "
            f"{res['redis_cpu_s_per_s']} CPU-s/s ({res['redis_cpu_us_per_firing']} µs/firing), "
            f"node {res['node_cpu_s_per_s']} ({res['node_cpu_us_per_firing']} µs/firing); "
            f"lag p50 {lag['p50']} p99 {lag['p99']} max {lag['max']} s; audit {res['audit']}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if args.plot:
        plot(args.plot, results)
    return results


def plot(path: str, results: list[dict[str, Any]]) -> None:
    """Redis and node CPU, and firings a second, over time for each size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    panels = (("Redis CPU (s/s)", "redis_cpu_s_per_s"), ("node CPU (s/s)", "node_cpu_s_per_s"),
              ("fired per second", "fired_per_s"))  # fmt: skip
    for ax, (title, key) in zip(axes, panels, strict=True):
        for res in results:
            ts = [s["t_s"] for s in res["samples"]]
            ax.plot(ts, [s[key] for s in res["samples"]], label=f"{res['jobs']:,} jobs")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("seconds")
        ax.grid(True, alpha=0.3)
    axes[0].legend()
    fig.suptitle("bench seedfleet: "
                 + "; ".join(f"{r['jobs']:,} jobs {_shares(r)}" for r in results))  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _shares(result: dict[str, Any]) -> str:
    counts = result.get("minutely_hourly_daily") or mix(result["jobs"], None)
    return " / ".join(f"{c * 100 / result['jobs']:.0f}" for c in counts) + " % m/h/d"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("seedfleet", help="the seed's fleet of cron jobs at two sizes, over time")
    p.add_argument("--redis", default=None, help="use this Redis instead of starting one")
    p.add_argument("--sizes", default="50000,500000", help="job counts, comma-separated")
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--rate", type=float, default=None, metavar="FIRES_PER_S",
                   help="as many minutely jobs as make this mean rate (default: 5 %%)")  # fmt: skip
    p.add_argument("--sample", type=float, default=10.0, help="seconds between CPU samples")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="everysec")
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument("--plot", default=None, metavar="PNG")
    p.set_defaults(bench=run)
