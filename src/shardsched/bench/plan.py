"""``shardsched bench plan``: the capacity planner.

From a workload (triggers per minute, burst size, job durations, slots per worker, history
retention) and throughputs measured on this project's own benchmarks, it prints how many
shards, nodes, workers and how much Redis memory a deployment needs, with the arithmetic
shown. The measured inputs default to the figures in bench/RESULTS.md and can be read
from the JSON the other bench commands write (``--burst-json``, ``--footprint-json``).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

#: z-score of the 90th percentile of a normal distribution (for the lognormal fit)
_Z90 = 1.2816


@dataclass(frozen=True)
class Workload:
    triggers_per_min: float = 50_000
    burst: int = 25_000
    burst_trigger_within_s: float = 1.0  #: every run record of the burst written within
    burst_start_within_s: float = 5.0
    duration_p50_s: float = 2.0
    duration_p90_s: float = 45.0
    duration_p99_s: float = 1200.0
    slots_per_worker: int = 5
    registered_jobs: int = 500_000
    runs_per_day: float | None = None  # default: triggers_per_min x 1440
    retention_days: float = 30.0  #: kept hot, in Redis
    cold_days: float = 0.0  #: kept in the archive (Parquet) after that


@dataclass(frozen=True)
class Measured:
    node_fires_per_s: float  #: one node's trigger rate in a burst (jobs / all created)
    redis_fires_per_s: float  #: the fire script alone on one Redis (the floor)
    ledger_runs_per_s: float  #: fired + claimed + completed per second, one Redis, burst
    bytes_per_job: float
    bytes_per_run: float
    redis_usable_gib: float = 25.0  #: memory one Redis server (or master) may use
    archive_bytes_per_run: float = 29.1  #: Parquet, one-line outputs (bench archive)


def mean_duration(w: Workload) -> float:
    """Mean of a lognormal fitted to p50 and p90: long tails dominate concurrency."""
    mu = math.log(w.duration_p50_s)
    sigma = max(0.0, (math.log(w.duration_p90_s) - mu) / _Z90)
    return math.exp(mu + sigma * sigma / 2)


def plan(w: Workload, m: Measured, headroom: float = 1.5) -> dict:
    rate = w.triggers_per_min / 60
    mean = mean_duration(w)
    steady_slots = rate * mean
    seed_steady_slots = rate * w.duration_p50_s  # the seed's "avg 2 s" reading
    # A burst starts together on top of the steady load; to start it within the window,
    # the slots must be free when it lands.
    slots = (steady_slots + w.burst) * headroom
    workers = math.ceil(slots / w.slots_per_worker)

    burst_rate = w.burst / w.burst_trigger_within_s
    peak_fire_rate = max(rate, burst_rate)
    nodes_for_rate = math.ceil(peak_fire_rate * headroom / m.node_fires_per_s)
    nodes = max(2, nodes_for_rate) + 1  # one spare so a kill -9 leaves full capacity
    redis_for_ledger = math.ceil(peak_fire_rate * headroom / m.ledger_runs_per_s)
    shards = max(64, 2 ** math.ceil(math.log2(max(1, 16 * nodes))))

    runs_per_day = w.runs_per_day or w.triggers_per_min * 1440
    runs_retained = runs_per_day * w.retention_days
    job_bytes = w.registered_jobs * m.bytes_per_job
    run_bytes = runs_retained * m.bytes_per_run
    total_gib = (job_bytes + run_bytes) * headroom / 2**30
    redis_for_memory = math.ceil(total_gib / m.redis_usable_gib)
    archive_gib_per_day = runs_per_day * m.archive_bytes_per_run / 2**30
    return {
        "workload": asdict(w) | {"runs_per_day": runs_per_day},
        "measured": asdict(m),
        "headroom": headroom,
        "trigger_rate_per_s": round(rate, 1),
        "mean_duration_s": round(mean, 1),
        "steady_concurrency": round(steady_slots),
        "steady_concurrency_seed_reading": round(seed_steady_slots),
        "worker_slots": math.ceil(slots),
        "workers": workers,
        "peak_fire_rate_per_s": round(peak_fire_rate),
        "nodes": nodes,
        "shards": shards,
        "redis_memory_gib": round(total_gib, 1),
        "redis_memory_jobs_gib": round(job_bytes / 2**30, 2),
        "redis_memory_runs_gib": round(run_bytes / 2**30, 1),
        "redis_masters_for_memory": redis_for_memory,
        "redis_masters_for_throughput": redis_for_ledger,
        "redis_masters": max(redis_for_memory, redis_for_ledger),
        "archive_gib_per_day": round(archive_gib_per_day, 2),
        "archive_gib_kept": round(archive_gib_per_day * w.cold_days, 1),
    }


def format_plan(p: dict) -> str:
    w, m = p["workload"], p["measured"]
    return "\n".join(
        [
            "workload: "
            f"{w['triggers_per_min']:,.0f} triggers/min ({p['trigger_rate_per_s']}/s), "
            f"burst {w['burst']:,} due in one second (all triggered within "
            f"{w['burst_trigger_within_s']} s, started within {w['burst_start_within_s']} s), "
            "durations p50/p90/p99 "
            f"{w['duration_p50_s']}/{w['duration_p90_s']}/{w['duration_p99_s']} s, "
            f"{w['slots_per_worker']} slots/worker, {w['registered_jobs']:,} jobs, "
            f"{w['runs_per_day']:,.0f} runs/day kept {w['retention_days']} days hot, "
            f"{w['cold_days']} days cold",
            "measured (this box): "
            f"node {m['node_fires_per_s']:,.0f} fires/s in a burst, Redis floor "
            f"{m['redis_fires_per_s']:,.0f} fires/s, ledger end to end "
            f"{m['ledger_runs_per_s']:,.0f} runs/s, {m['bytes_per_job']:.0f} B/job, "
            f"{m['bytes_per_run']:.0f} B/run",
            f"headroom x{p['headroom']}",
            "",
            f"worker slots   {p['worker_slots']:>12,}   mean duration {p['mean_duration_s']} s "
            f"(lognormal fit of p50/p90) x {p['trigger_rate_per_s']}/s = "
            f"{p['steady_concurrency']:,} busy, + the burst "
            f"(reading the mean as p50, as the seed did: {p['steady_concurrency_seed_reading']:,})",
            f"workers        {p['workers']:>12,}   at {w['slots_per_worker']} slots each",
            f"nodes          {p['nodes']:>12,}   for {p['peak_fire_rate_per_s']:,} fires/s "
            "at peak, at least 2, plus one spare",
            f"shards         {p['shards']:>12,}   >= 16 per node, a power of two, at least 64",
            f"redis memory   {p['redis_memory_gib']:>10,} GiB   jobs "
            f"{p['redis_memory_jobs_gib']} GiB + runs {p['redis_memory_runs_gib']} GiB",
            f"redis masters  {p['redis_masters']:>12,}   memory needs "
            f"{p['redis_masters_for_memory']} at {m['redis_usable_gib']} GiB each, throughput "
            f"needs {p['redis_masters_for_throughput']}",
            f"archive        {p['archive_gib_per_day']:>10,} GiB/day  at "
            f"{m['archive_bytes_per_run']} B/run (Parquet, bench archive; more with longer "
            f"outputs), {p['archive_gib_kept']:,} GiB for {w['cold_days']} days cold",
        ]
    )


def measured_from(args: argparse.Namespace) -> Measured:
    values = {
        "node_fires_per_s": args.node_fires_per_s,
        "redis_fires_per_s": args.redis_fires_per_s,
        "ledger_runs_per_s": args.ledger_runs_per_s,
        "bytes_per_job": args.bytes_per_job,
        "bytes_per_run": args.bytes_per_run,
        "redis_usable_gib": args.redis_usable_gib,
        "archive_bytes_per_run": args.archive_bytes_per_run,
    }
    if args.burst_json:
        b = json.loads(Path(args.burst_json).read_text())
        values["node_fires_per_s"] = b["jobs"] / b["all_triggered_s"]
        values["ledger_runs_per_s"] = b["jobs"] / b["all_completed_s"]
        if b.get("redis_floor_fires_per_s"):
            values["redis_fires_per_s"] = b["redis_floor_fires_per_s"]
    if args.footprint_json:
        f = json.loads(Path(args.footprint_json).read_text())
        values["bytes_per_job"] = f["bytes_per_job"]
        values["bytes_per_run"] = f["bytes_per_completed_run"]
    return Measured(**values)


def run(args: argparse.Namespace) -> dict:
    w = Workload(
        triggers_per_min=args.triggers_per_min,
        burst=args.burst,
        burst_trigger_within_s=args.burst_trigger_within,
        burst_start_within_s=args.burst_start_within,
        duration_p50_s=args.duration_p50,
        duration_p90_s=args.duration_p90,
        duration_p99_s=args.duration_p99,
        slots_per_worker=args.slots_per_worker,
        registered_jobs=args.jobs,
        runs_per_day=args.runs_per_day,
        retention_days=args.retention_days,
        cold_days=args.cold_days,
    )
    result = plan(w, measured_from(args), args.headroom)
    print(format_plan(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="capacity planner: shards, nodes, workers, Redis memory")
    p.add_argument("--triggers-per-min", type=float, default=50_000)
    p.add_argument("--burst", type=int, default=25_000)
    p.add_argument("--burst-trigger-within", type=float, default=1.0, metavar="S")
    p.add_argument("--burst-start-within", type=float, default=5.0, metavar="S")
    p.add_argument("--duration-p50", type=float, default=2.0)
    p.add_argument("--duration-p90", type=float, default=45.0)
    p.add_argument("--duration-p99", type=float, default=1200.0)
    p.add_argument("--slots-per-worker", type=int, default=5)
    p.add_argument("--jobs", type=int, default=500_000, help="registered jobs")
    p.add_argument("--runs-per-day", type=float, default=None)
    p.add_argument(
        "--retention-days", "--hot-days", dest="retention_days", type=float, default=30.0
    )
    p.add_argument("--cold-days", type=float, default=0.0, help="kept in the archive")
    p.add_argument("--archive-bytes-per-run", type=float, default=29.1)
    p.add_argument("--headroom", type=float, default=1.5)
    # Measured on this box (bench/RESULTS.md); --burst-json / --footprint-json override.
    p.add_argument("--node-fires-per-s", type=float, default=44_000)
    p.add_argument("--redis-fires-per-s", type=float, default=63_000)
    p.add_argument("--ledger-runs-per-s", type=float, default=19_700)
    p.add_argument("--bytes-per-job", type=float, default=868)
    p.add_argument("--bytes-per-run", type=float, default=163)
    p.add_argument("--redis-usable-gib", type=float, default=25.0)
    p.add_argument("--burst-json", default=None, metavar="FILE")
    p.add_argument("--footprint-json", default=None, metavar="FILE")
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
