"""``shardsched bench steady``: a constant trigger rate for a while; the trigger-lag SLA.

``--rate`` interval jobs every second, their phases spread evenly over the second, so the
node fires ``rate`` runs a second without a burst; two workers run them (noop). The lag of
every tick comes from the audit (record created - tick), which also checks that nothing
was lost or doubled.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import redis as redis_py

from shardsched.bench import floor, trace_sink
from shardsched.bench.burst import server_ms, start_ready
from shardsched.bench.harness import Procs, bench_redis
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops.history import audit
from shardsched.sdk import Client


def spread_jobs(prefix: str, rate: int, start: datetime, fail_every: int = 0) -> Iterator[JobSpec]:
    """``rate`` noop jobs every second from ``start``, their phases spread evenly over the
    second: ``rate`` triggers a second without a burst (every ``fail_every``th failing:
    bench/trace_sink)."""
    for i in range(rate):
        at = start + timedelta(seconds=i / rate)
        failing = fail_every and i % fail_every == 0
        yield JobSpec(
            name=f"{prefix}-{i}",
            schedule=IntervalSchedule(every_s=1.0, start_at=at),
            command="handler:bench-fail" if failing else "handler:noop",
        )


def run(args: argparse.Namespace) -> dict:
    sink = trace_sink.Sink(args.traces, schedule_delay_ms=None) if args.traces else None
    with (
        trace_sink.exporting_to(sink),
        bench_redis(args.redis, args.fsync) as url,
        Procs() as procs,
    ):
        r = redis_py.Redis.from_url(url)
        ns = f"steady{int(time.time() * 1000) % 10**9}"
        client = Client(url, ns)
        start = from_ms(server_ms(r) + round(args.lead * 1000))
        client.add_jobs(spread_jobs("steady", args.rate, start, args.fail_every), batch=2000)
        common = ("--redis", url, "--namespace", ns)
        start_ready(procs, "node", "node", *common, "--node-id", "steady-node", "--no-http")
        for i in range(args.workers):
            start_ready(
                procs,
                f"worker{i}",
                "worker",
                *common,
                "--worker-id",
                f"steady-w{i}",
                "--concurrency",
                "200",
                *(("--import", "shardsched.bench.trace_sink") if args.fail_every else ()),
            )
        end_ms = int(start.timestamp() * 1000) + round(args.duration * 1000)
        # CPU per firing over the run's middle: from 5 s after the first tick to its end
        while server_ms(r) < int(start.timestamp() * 1000) + 5000:
            time.sleep(0.05)
        cpu0 = {name: floor.cpu_seconds(p.pid) for name, p in procs.procs.items()}
        redis0, fired0 = floor.redis_cpu(r), _fired(r, client)
        while server_ms(r) < end_ms:
            time.sleep(0.2)
        cpu = {name: floor.cpu_seconds(p.pid) - cpu0[name] for name, p in procs.procs.items()}
        redis_cpu, fired = floor.redis_cpu(r) - redis0, _fired(r, client) - fired0
        while server_ms(r) < end_ms + 1000:
            time.sleep(0.2)
        report = client._run(audit.audit(client.deployment, settle_s=0.5, late_after_s=0.1))
        procs.stop_all()
        client.close()
        r.close()
    result = {
        "rate_per_s": args.rate,
        "duration_s": args.duration,
        "fsync": args.fsync,
        "ticks": report.expected,
        "fired": report.fired,
        "trigger_lag_s": {
            "p50": report.lag_s.p50,
            "p90": report.lag_s.p90,
            "p99": report.lag_s.p99,
            "max": report.lag_s.max,
        },
        "late_over_100ms": report.late,
        "audit": {"missing": report.missing, "duplicated": report.duplicated},
        "cpu_us_per_firing": floor.per_run(cpu, redis_cpu, max(fired, 1)),
        "traces": sink.report(set()) if sink else None,
        "fail_every": args.fail_every,
    }
    lag = result["trigger_lag_s"]
    print(
        f"steady: {args.rate} triggers/s for {args.duration} s (fsync {args.fsync}): "
        f"{report.fired} fired; trigger lag p50 {lag['p50']} s, p90 {lag['p90']} s, "
        f"p99 {lag['p99']} s, max {lag['max']} s; {report.late} later than 100 ms; "
        f"audit missing {report.missing}, duplicated {report.duplicated}; "
        f"CPU a firing (µs): {result['cpu_us_per_firing']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if report.missing or report.duplicated:
        raise SystemExit(1)
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("steady", help="a constant trigger rate; trigger-lag percentiles")
    p.add_argument("--redis", default=None)
    p.add_argument("--rate", type=int, default=830, help="triggers per second")
    p.add_argument("--duration", type=float, default=60.0, help="seconds")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lead", type=float, default=5.0, help="seconds before the first tick")
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="always")
    p.add_argument("--traces", default=None, metavar="off|all|RATIO", help="as bench burst's")
    p.add_argument("--fail-every", type=int, default=0, help="every Nth job fails (0: none)")
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)


def _fired(r: redis_py.Redis, client: Client) -> int:
    """Ticks fired so far, every shard's counter."""
    dep = client.deployment
    replies = [r.hget(dep.shard(s).stats, "fired") for s in range(dep.n_shards)]
    return sum(int(v or 0) for v in replies)
