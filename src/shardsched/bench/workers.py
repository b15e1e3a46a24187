"""``shardsched bench fleet``: what a fleet of workers costs Redis, idle and under load.

Real workers (the worker's own code: its claim, renewal, completion and wake-up, its
heartbeat), many to a process on one trio loop sharing a connection pool, so thousands fit
on a small box: ``--fleets 10,100,1000`` attaches each fleet in turn to one Redis and one
node. For each it measures Redis's CPU per second with nothing due (idle), then under a
steady ``--rate`` triggers a second: Redis CPU per firing, claim latency (a run's due time
to its start on a worker) p50/p99, and fairness (runs per worker: the spread over the
busiest and idlest workers). The target is a Redis cost per firing that does not grow with
the number of idle workers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from shardsched.bench import floor, steady_floor
from shardsched.bench.harness import (
    Procs,
    bench_client,
    bench_redis,
    percentiles,
    server_ms,
    start_ready,
)
from shardsched.bench.steady import spread_jobs
from shardsched.core.ids import parse_run_id
from shardsched.core.instants import from_ms
from shardsched.sdk import Client
from shardsched.store.drive import drive_async


def host(url: str, namespace: str, first: int, count: int, slots: int) -> None:
    """One fleet process: ``count`` workers (ids fleet-<first>…) until SIGTERM."""
    from shardsched import ops
    from shardsched.runtime.heap import freeze_startup
    from shardsched.runtime.metrics import Metrics
    from shardsched.store.redis import Redis
    from shardsched.worker.worker import Worker

    async def main() -> None:
        redis = Redis(url, size=8)
        dep = await drive_async(ops.open_deployment(namespace, None), redis)
        metrics = Metrics()  # one for the process: the bench reads Redis, not these
        async with trio.open_nursery() as nursery:
            for i in range(first, first + count):
                worker = Worker(redis, dep, f"fleet-{i}", concurrency=slots, metrics=metrics)
                await nursery.start(worker.run)
            freeze_startup()
            print("fleet ready", flush=True)

    trio.run(main)


def _runs(r: Any, client: Client, job_ids: list[str], since_ms: int) -> list[tuple[int, int, str]]:
    """(due, started, worker) of every first attempt due since ``since_ms``."""
    dep = client.deployment
    out = []
    pipe = r.pipeline(transaction=False)
    for job_id in job_ids:
        pipe.zrangebyscore(dep.keys_for(job_id).runs_of(job_id), since_ms, "+inf")
    rids = [rid.decode() for members in pipe.execute() for rid in members]
    pipe = r.pipeline(transaction=False)
    for rid in rids:
        pipe.hmget(dep.keys_for(rid).run(rid), "s", "b", "w")
    for rid, (s, b, w) in zip(rids, pipe.execute(), strict=True):
        if b and w and rid.endswith(":1"):
            due = int(s) if s else int(parse_run_id(rid).tick)
            out.append((due, int(b), w.decode()))
    return out


def measure(args: argparse.Namespace, fleet: int, url: str, r: Any) -> dict[str, Any]:
    ns = f"fleet{fleet}x{int(time.time()) % 10**6}"
    r.hset(f"{ns}:{{g}}:meta", "shards", args.shards)
    client = Client(url, ns)
    with Procs() as procs:
        start_ready(procs, "node", "node", "--redis", url, "--namespace", ns, "--no-http")
        per = -(-fleet // args.processes)
        for p in range(args.processes):
            count = min(per, fleet - p * per)
            if count > 0:
                start_ready(
                    procs, f"fleet{p}", "bench", "fleet-host", "--redis", url, "--namespace", ns,
                    "--first", str(p * per), "--count", str(count), "--slots", str(args.slots),
                    timeout=120,
                )  # fmt: skip
        time.sleep(args.settle)
        procs0 = {name: floor.cpu_seconds(p.pid) for name, p in procs.procs.items()}
        cpu0, t0 = floor.redis_cpu(r), time.monotonic()
        time.sleep(args.idle)
        took = time.monotonic() - t0
        idle = (floor.redis_cpu(r) - cpu0) / took
        procs_idle = {
            name: (floor.cpu_seconds(p.pid) - procs0[name]) / took
            for name, p in procs.procs.items()
        }
        start = from_ms(server_ms(r) + 2000)
        created = client.add_jobs(spread_jobs("fleet", args.rate, start), batch=2000)
        job_ids = [c.job_id for c in created]
        while server_ms(r) < int(start.timestamp() * 1000) + 2000:
            time.sleep(0.01)
        window_start = server_ms(r)
        cpu0, t0 = floor.redis_cpu(r), time.monotonic()
        stats0 = r.info("commandstats")
        procs0 = {name: floor.cpu_seconds(p.pid) for name, p in procs.procs.items()}
        time.sleep(args.duration)
        took = time.monotonic() - t0
        busy = (floor.redis_cpu(r) - cpu0) / took
        procs_cpu = {
            name: (floor.cpu_seconds(p.pid) - procs0[name]) / took
            for name, p in procs.procs.items()
        }
        stats = _commands(stats0, r.info("commandstats"), took)
        window_end = server_ms(r)
        for job_id in job_ids:
            client.pause(job_id)
        time.sleep(1.0)
        runs = [x for x in _runs(r, client, job_ids, window_start) if x[0] <= window_end - 1000]
    client.close()
    lags = [(b - s) / 1000 for s, b, _ in runs]
    per_worker = Counter(w for _, _, w in runs)
    counts = [per_worker.get(f"fleet-{i}", 0) for i in range(fleet)]
    fired = len(runs) / max((window_end - 1000 - window_start) / 1000, 0.001)
    return {
        "workers": fleet,
        "redis_cpu_idle_s_per_s": round(idle, 4),
        "redis_cpu_busy_s_per_s": round(busy, 4),
        "redis_cpu_us_per_firing": round((busy - idle) / max(fired, 1) * 1e6, 1),
        "redis_cpu_us_per_firing_all_in": round(busy / max(fired, 1) * 1e6, 1),
        "firings_per_s": round(fired, 1),
        "redis_commands_per_firing": {
            name: {"calls": round(calls / max(fired, 1), 2), "us": round(us / max(fired, 1), 1)}
            for name, (calls, us) in stats.items()
        },
        "process_cpu_s_per_s": _split(procs_cpu),
        "process_cpu_idle_s_per_s": _split(procs_idle),
        "process_cpu_us_per_firing": {
            name: round((busy_s - _split(procs_idle)[name]) / max(fired, 1) * 1e6, 1)
            for name, busy_s in _split(procs_cpu).items()
        },
        "claim_latency_s": percentiles(lags),
        "runs_per_worker": {
            "min": min(counts),
            "max": max(counts),
            "mean": round(sum(counts) / len(counts), 2),
            "idle_workers": sum(1 for c in counts if c == 0),
        },
    }


def _split(cpu: dict[str, float]) -> dict[str, float]:
    """CPU seconds a second of the node and of the worker hosts together."""
    hosts = sum(v for k, v in cpu.items() if k != "node")
    return {"node": round(cpu.get("node", 0.0), 4), "worker_hosts": round(hosts, 4)}


def _commands(before: dict[str, Any], after: dict[str, Any], took: float) -> dict[str, Any]:
    """(calls/s, µs of Redis CPU/s) per command over a window, the costliest first. A
    script's FCALL includes the commands it ran, which are listed on their own too."""
    out = {}
    for name, now in after.items():
        was = before.get(name, {"calls": 0, "usec": 0})
        calls, us = now["calls"] - was["calls"], now["usec"] - was["usec"]
        if calls:
            out[name.removeprefix("cmdstat_")] = (calls / took, us / took)
    ranked = sorted(out.items(), key=lambda kv: -kv[1][1])
    return dict(ranked[:24])


def run(args: argparse.Namespace) -> dict[str, Any]:
    fleets = [int(x) for x in args.fleets.split(",")]
    results = []
    with bench_redis(args.redis, args.fsync) as url:
        r = bench_client(url)
        for fleet in fleets:
            print(f"fleet: {fleet} workers…", file=sys.stderr, flush=True)
            result = measure(args, fleet, url, r)
            results.append(result)
            lat = result["claim_latency_s"]
            print(
                f"fleet {fleet:>5} workers: redis idle"
                f" {result['redis_cpu_idle_s_per_s'] * 100:.1f}%"
                f" CPU; at {result['firings_per_s']}/s {result['redis_cpu_us_per_firing']} µs"
                f" per firing above idle ({result['redis_cpu_us_per_firing_all_in']} all in);"
                f" claim p50 {lat['p50']} p99 {lat['p99']} s; runs per worker"
                f" {result['runs_per_worker']}; CPU s/s node"
                f" {result['process_cpu_s_per_s']['node']} worker hosts"
                f" {result['process_cpu_s_per_s']['worker_hosts']}; per firing above idle"
                f" {result['process_cpu_us_per_firing']} µs",
                flush=True,
            )
            top = list(result["redis_commands_per_firing"].items())[:6]
            print(
                "  Redis per firing: "
                + ", ".join(f"{n} {v['calls']}x {v['us']} µs" for n, v in top),
                flush=True,
            )
        floors = None if args.no_floor else _floors(args, url, r, fleets[0])
    out = {"rate": args.rate, "slots": args.slots, "fleets": results, "stream_floor": floors}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    if args.plot:
        earlier = json.loads(Path(args.compare).read_text()) if args.compare else None
        plot(args.plot, out, earlier)
    return out


def _floors(args: argparse.Namespace, url: str, r: Any, consumers: int) -> dict[str, Any]:
    """The bare stream queue on the same Redis: at the same rate one firing at a time,
    with as many consumers as the first fleet has workers (:mod:`.steady_floor`), and its
    burst of 25,000 (:mod:`.floor`, 2 consumers, as ``bench burst``'s floor)."""
    print("the stream floor, steady and burst…", file=sys.stderr, flush=True)
    steady = steady_floor.measure(
        r, url, args.rate, args.duration, args.idle, args.shards, consumers
    )
    burst = floor.stream_floor(r, url, 25_000, args.shards, 2)
    ratio = steady["redis_cpu_us_per_firing"] / max(burst["redis_cpu_us_per_run"], 0.1)
    print(
        f"stream floor: steady at {steady['firings_per_s']}/s Redis"
        f" {steady['redis_cpu_us_per_firing']} µs a firing above idle, producer"
        f" {steady['producer_cpu_us_per_firing']} µs, consumers"
        f" {steady['consumer_cpu_us_per_firing']} µs; burst Redis"
        f" {burst['redis_cpu_us_per_run']} µs a run, consumers"
        f" {burst['consumer_cpu_us_per_run']} µs; Redis steady / burst {ratio:.1f}x",
        flush=True,
    )
    return {"steady": steady, "burst": burst, "redis_steady_over_burst": round(ratio, 2)}


def plot(path: str, result: dict[str, Any], earlier: dict[str, Any] | None = None) -> None:
    """Redis CPU idle, Redis CPU per firing and claim p99 against the fleet size; an
    earlier result (``--compare``) drawn dashed beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("Redis CPU idle (%)", lambda f: f["redis_cpu_idle_s_per_s"] * 100),
        ("Redis CPU per firing, all in (µs)", lambda f: f["redis_cpu_us_per_firing_all_in"]),
        ("claim latency p99 (ms)", lambda f: f["claim_latency_s"]["p99"] * 1000),
    )
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (title, value) in zip(axes, panels, strict=True):
        for data, style, label in ((result, "o-", "this run"), (earlier, "s--", "compared")):
            if data is None:
                continue
            sizes = [f["workers"] for f in data["fleets"]]
            ax.plot(sizes, [value(f) for f in data["fleets"]], style, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log" if "latency" in title else "linear")
        ax.set_xlabel("workers (idle between firings)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"bench fleet: {result['rate']} firings/s, {result['slots']} slots a worker")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help="a fleet of workers: Redis CPU idle and per firing, claims")
    p.add_argument("--redis", default=None, help="use this Redis instead of starting one")
    p.add_argument("--fleets", default="10,100,1000", help="fleet sizes (workers), comma-separated")
    p.add_argument("--processes", type=int, default=4, help="worker processes per fleet")
    p.add_argument("--slots", type=int, default=5, help="slots per worker (the seed: 5)")
    p.add_argument("--rate", type=int, default=830, help="triggers per second")
    p.add_argument("--duration", type=float, default=15.0, help="seconds under load")
    p.add_argument("--idle", type=float, default=5.0, help="seconds measured idle")
    p.add_argument("--settle", type=float, default=3.0, help="seconds after start-up")
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="off")
    p.add_argument(
        "--no-floor", action="store_true", help="skip the stream floor, steady and burst"
    )
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument("--plot", default=None, metavar="PNG", help="plot the figures by fleet size")
    p.add_argument(
        "--compare", default=None, metavar="JSON", help="an earlier --json to plot beside"
    )
    p.set_defaults(bench=run)
    h = sub.add_parser("fleet-host", help="(internal) one process of a fleet")
    h.add_argument("--redis", required=True)
    h.add_argument("--namespace", required=True)
    h.add_argument("--first", type=int, required=True)
    h.add_argument("--count", type=int, required=True)
    h.add_argument("--slots", type=int, default=5)
    h.set_defaults(bench=lambda a: host(a.redis, a.namespace, a.first, a.count, a.slots))
