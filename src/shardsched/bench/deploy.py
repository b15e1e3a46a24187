"""``shardsched bench deploy``: zero missed fires through a deploy, on a minute boundary.

``--jobs`` cron jobs ``* * * * *`` (25,000 by default) on one Redis, two nodes and two
workers (the fault campaign's fleet, bench/fleet.py). Each run records itself
(``handler:bench-record``, bench/record_handler.py: written by the job, not by
shardsched). Three boundaries in a row:

- **steady**: nothing happens (the floor the other two are compared with);
- **rolling**: SIGTERM each node, then each worker, in turn, each started again as soon
  as it has exited, a step a second from 2.2 s before the boundary: the nodes before
  it, one worker 0.2 s before it (its successor starts up during the burst), the other
  0.8 s into the burst (it drains what it holds while the rest is claimed);
- **all nodes**: both nodes SIGTERMed 0.5 s before the boundary, each started again as
  soon as it exits: nobody owns the shards when the tick falls due.

For each boundary: runs made, missing (no run for the tick), the trigger lag (run made
minus tick) p50/p99/max, the last start, and from the jobs' own record runs lost
(never executed), executed twice and executed again after their recorded finish. Then
the audit over the whole time (0 missing, 0 duplicated).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis as redis_py

from shardsched.bench.burst import server_ms as _server_ms
from shardsched.bench.fleet import Fleet, lost_and_after, read_record
from shardsched.bench.harness import BenchRedis, percentiles
from shardsched.core.models import CronSchedule, JobSpec
from shardsched.ops.history import audit
from shardsched.sdk import Client

STEP_S = 1.0  #: between the steps of a rolling restart


def _rolling(fleet: Fleet, wait: Callable[[float], None]) -> None:
    for name in ("node-a", "node-b", "worker-a", "worker-b"):
        began = time.monotonic()
        fleet.restart(name)
        wait(max(0.0, STEP_S - (time.monotonic() - began)))


def _all_nodes(fleet: Fleet, wait: Callable[[float], None]) -> None:
    fleet.restart("node-a", "node-b")


#: phase -> (seconds before the boundary it starts, what it does)
PHASES: dict[str, tuple[float, Callable[[Fleet, Callable[[float], None]], None] | None]] = {
    "steady": (0.0, None),
    "rolling": (2.2, _rolling),
    "all-nodes": (0.5, _all_nodes),
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="shardsched-deploy-"))
    record = root / "record"
    record.mkdir()
    server = BenchRedis(args.fsync)
    server.start()
    r = redis_py.Redis(port=server.port)
    ns = "deploy"
    r.hset(f"{ns}:{{g}}:meta", "shards", args.shards)
    fleet = Fleet(server.url, ns, root, env={"SHARDSCHED_BENCH_RECORD": str(record)})
    fleet.worker_args = ("--import", "shardsched.bench.record_handler", "--concurrency", "500")
    client = Client(server.url, ns)
    phases: list[dict[str, Any]] = []
    try:
        specs = (
            JobSpec(name=f"d{i}", schedule=CronSchedule(expression="* * * * *"),
                    command="handler:bench-record")
            for i in range(args.jobs)
        )  # fmt: skip
        job_ids = [c.job_id for c in client.add_jobs(specs, batch=2000)]
        for name in ("node-a", "node-b", "worker-a", "worker-b"):
            (fleet.node if name.startswith("node") else fleet.worker)(name)
        now = _server_ms(r)
        first = (now // 60_000 + 1) * 60_000
        if first - now < 8_000:  # time to start up before the first boundary
            first += 60_000

        def wait_until(ms: int) -> None:
            while (left := ms - _server_ms(r)) > 0:
                fleet.check()
                time.sleep(min(left / 1000, 0.2))

        for i, (name, (lead, act)) in enumerate(PHASES.items()):
            boundary = first + i * 60_000
            print(f"{name}: boundary at {boundary} ms…", file=sys.stderr, flush=True)
            wait_until(boundary - round(lead * 1000))
            restarts = len(fleet.restarts)
            if act is not None:
                act(fleet, lambda s: wait_until(_server_ms(r) + round(s * 1000)))
            wait_until(boundary + args.after * 1000)
            phases.append({"phase": name, "boundary_ms": boundary,
                           "restarts": fleet.restarts[restarts:]})  # fmt: skip
        report = client._run(audit.audit(client.deployment, settle_s=0.0))
        for p in phases:
            p.update(_boundary(r, client, job_ids, p["boundary_ms"]))
        fleet.stop_all()
    finally:
        fleet.stop_all()
        client.close()
        r.close()
        server.stop()
    executions, starts = read_record(record)
    for p in phases:
        rids = p.pop("_runs")
        p["lost"], p["reexecuted_after_completion"] = lost_and_after(rids, executions, starts)
        p["executed_twice"] = sum(1 for rid in rids if executions[rid] > 1)
    result = {
        "jobs": args.jobs,
        "shards": args.shards,
        "fsync": args.fsync,
        "phases": phases,
        "audit": {"expected": report.expected, "fired": report.fired,
                  "missing": report.missing, "duplicated": report.duplicated},
        "exits": dict(fleet.exits),
    }  # fmt: skip
    print(format_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        plot(args.plot, result)
    return result


def plot(path: str, result: dict[str, Any]) -> None:
    """Trigger lag p50/p99/max and the last start of each boundary, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = result["phases"]
    bars = (
        ("lag p50", lambda p: p["trigger_lag_s"]["p50"]),
        ("lag p99", lambda p: p["trigger_lag_s"]["p99"]),
        ("lag max", lambda p: p["trigger_lag_s"]["max"]),
        ("all started", lambda p: p["all_started_s"]),
    )
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(bars)
    for i, (label, value) in enumerate(bars):
        xs = [j + i * width for j in range(len(phases))]
        ax.bar(xs, [value(p) or 0 for p in phases], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(phases))])
    ax.set_xticklabels([p["phase"] for p in phases])
    ax.set_ylabel("seconds after the boundary")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"bench deploy: {result['jobs']:,} minute jobs, one boundary each")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _boundary(r: Any, client: Client, job_ids: list[str], tick: int) -> dict[str, Any]:
    """The runs of one boundary's tick from the ledger: made, missing, lags, starts."""
    dep = client.deployment
    rids = [f"{job}:{tick}:1" for job in job_ids]
    pipe = r.pipeline(transaction=False)
    for rid in rids:
        pipe.hmget(dep.keys_for(rid).run(rid), "c", "b", "f")
    runs: dict[str, int | None] = {}
    lags, begun = [], []
    for rid, (c, b, f) in zip(rids, pipe.execute(), strict=True):
        if c is None:
            continue
        runs[rid] = int(f) if f else None
        lags.append((int(c) - tick) / 1000)
        if b:
            begun.append((int(b) - tick) / 1000)
    return {
        "made": len(runs),
        "missing": len(rids) - len(runs),
        "trigger_lag_s": percentiles(lags),
        "all_started_s": max(begun) if begun else None,
        "started": len(begun),
        "_runs": runs,
    }


def format_table(result: dict[str, Any]) -> str:
    rows = [
        f"{'phase':<10} {'made':>6} {'miss':>5} {'lag p50':>8} {'p99':>7} {'max':>7} "
        f"{'all started':>11} {'lost':>5} {'x2':>4} {'after':>5}  restarts (s to exit)"
    ]
    for p in result["phases"]:
        lag = p["trigger_lag_s"]
        restarts = ", ".join(f"{n} {s}s" + (f" rc {c}" if c else "") for n, s, c in p["restarts"])
        rows.append(
            f"{p['phase']:<10} {p['made']:>6} {p['missing']:>5} {lag['p50'] or 0:>7.3f}s "
            f"{lag['p99'] or 0:>6.3f}s {lag['max'] or 0:>6.3f}s {p['all_started_s'] or 0:>10.3f}s "
            f"{p['lost']:>5} {p['executed_twice']:>4} {p['reexecuted_after_completion']:>5}  "
            f"{restarts or '-'}"
        )
    a = result["audit"]
    rows.append(
        f"audit: {a['expected']} ticks, {a['fired']} fired, {a['missing']} missing, "
        f"{a['duplicated']} duplicated; exits: {result['exits'] or 'none'}"
    )
    return "\n".join(rows)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("deploy", help="a rolling and an all-nodes restart on a minute boundary")
    p.add_argument("--jobs", type=int, default=25_000, help="cron jobs every minute")
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="off")
    p.add_argument("--after", type=int, default=20, help="seconds watched after each boundary")
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument("--plot", default=None, metavar="PNG", help="lags of each boundary")
    p.set_defaults(bench=run)
