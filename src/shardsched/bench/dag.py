"""``shardsched bench dag``: DAG runs released at once, end to end.

N DAGs of a 10-task diamond-and-chain shape (a → b, c → d → e → f → g, h → i → j), each
``once`` at the same second, so N DAG runs open together; a node and worker processes run
them (in-process no-op tasks, as the job burst's). Measured: task releases per second,
release latency (an upstream task's completion to its downstream task's release, when the
downstream run record is created and put on the ready stream, i.e. claimable), CPU per task
run for the node, the workers and Redis, and exactly-once: every task of every DAG run
released once (one first-attempt record, one ``scheduled`` event), every DAG run
succeeded, and the audit's missing and duplicated at 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from shardsched.bench import floor
from shardsched.bench.harness import (
    Procs,
    bench_client,
    bench_redis,
    percentiles,
    plan_boundary,
    server_ms,
    start_ready,
)
from shardsched.core.instants import from_ms
from shardsched.core.models import DagSpec, OnceSchedule, TaskSpec
from shardsched.ops.history import audit
from shardsched.sdk import Client

#: The shape: each task and the tasks it waits for.
SHAPE: dict[str, list[str]] = {
    "a": [],
    "b": ["a"],
    "c": ["a"],
    "d": ["b", "c"],
    "e": ["d"],
    "f": ["e"],
    "g": ["f"],
    "h": ["f"],
    "i": ["g", "h"],
    "j": ["i"],
}


def _spec(i: int, boundary: int, command: str) -> DagSpec:
    return DagSpec(
        name=f"dag-{i}",
        schedule=OnceSchedule(at=from_ms(boundary)),
        tasks=[TaskSpec(name=t, command=command, depends_on=deps) for t, deps in SHAPE.items()],
    )


def _wait(r: Any, client: Client, dag_ids: list[str], boundary: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout + max(0, (boundary - server_ms(r)) / 1000)
    dep = client.deployment
    while time.monotonic() < deadline:
        pipe = r.pipeline(transaction=False)
        for dag_id in dag_ids:
            pipe.hget(dep.keys_for(dag_id).dag_run(f"{dag_id}:{boundary}"), "st")
        states = pipe.execute()
        if all(s in (b"succeeded", b"failed") for s in states):
            return
        time.sleep(0.05)
    raise TimeoutError("DAG runs not finished")


def _task_runs(r: Any, client: Client, dag_ids: list[str], boundary: int) -> list[dict]:
    dep = client.deployment
    pipe = r.pipeline(transaction=False)
    keys = []
    for dag_id in dag_ids:
        for task in SHAPE:
            rid = f"{dag_id}.{task}:{boundary}:1"
            keys.append((dag_id, task, rid))
            pipe.hmget(dep.keys_for(rid).run(rid), "st", "c", "b", "f")
    rows = []
    for (dag_id, task, rid), (st, c, b, f) in zip(keys, pipe.execute(), strict=True):
        rows.append(
            {
                "dag": dag_id,
                "task": task,
                "run_id": rid,
                "state": st.decode() if st else None,
                "released": int(c) if c else None,
                "started": int(b) if b else None,
                "finished": int(f) if f else None,
            }
        )
    return rows


def _scheduled_events(r: Any, client: Client) -> Counter[str]:
    """How often each run was made 'scheduled' (a release), from the shards' event streams."""
    dep = client.deployment
    seen: Counter[str] = Counter()
    for s in range(dep.n_shards):
        for _eid, fields in r.xrange(dep.shard(s).events):
            for rid, change in fields.items():  # "<old>><new>|<worker>|<detail>"
                if change.startswith(b">scheduled|"):  # made, and put on the stream
                    seen[rid.decode()] += 1
    return seen


def run(args: argparse.Namespace) -> dict[str, Any]:
    command = "handler:noop" if args.job_command == "noop" else args.job_command
    with bench_redis(args.redis, args.fsync) as url, Procs() as procs:
        r = bench_client(url)
        ns = f"dagbench{int(time.time() * 1000) % 10**9}"
        r.hset(f"{ns}:{{g}}:meta", "shards", args.shards)
        client = Client(url, ns)
        common = ("--redis", url, "--namespace", ns)
        start_ready(procs, "node0", "node", *common, "--node-id", "dag-node", "--no-http")
        for i in range(args.workers):
            start_ready(
                procs, f"worker{i}", "worker", *common, "--worker-id", f"dag-worker-{i}",
                "--concurrency", str(args.concurrency),
            )  # fmt: skip
        boundary = plan_boundary(r, "once", args.lead + args.dags / 500)
        print(f"dag: registering {args.dags} DAGs…", file=sys.stderr, flush=True)
        dag_ids = [client.add_dag(_spec(i, boundary, command)).dag_id for i in range(args.dags)]
        if server_ms(r) > boundary - 500:
            raise RuntimeError("set-up took past the boundary; raise --lead")
        while server_ms(r) < boundary - 1000:
            time.sleep(0.005)
        cpu0 = {name: floor.cpu_seconds(p.pid) for name, p in procs.procs.items()}
        redis0 = floor.redis_cpu(r)
        _wait(r, client, dag_ids, boundary, args.timeout)
        cpu = {name: floor.cpu_seconds(p.pid) - cpu0[name] for name, p in procs.procs.items()}
        redis_used = floor.redis_cpu(r) - redis0
        procs.stop_all(signal.SIGTERM)
        rows = _task_runs(r, client, dag_ids, boundary)
        events = _scheduled_events(r, client)
        report = client._run(audit.audit(client.deployment, settle_s=0.0, late_after_s=1.0))
        dag_states = Counter(
            client.get_dag_run(f"{d}:{boundary}").state.value for d in dag_ids[:50]
        )
        client.close()
    by_run = {(row["dag"], row["task"]): row for row in rows}
    latencies, starts = [], []
    for (dag_id, task), row in by_run.items():
        parents = SHAPE[task]
        if parents and row["released"]:
            done = max(by_run[(dag_id, p)]["finished"] or 0 for p in parents)
            latencies.append((row["released"] - done) / 1000)
            if row["started"]:
                starts.append((row["started"] - done) / 1000)
    releases = [row["released"] for row in rows if row["released"]]
    span = (max(releases) - boundary) / 1000 if releases else None
    n = len(rows)
    released_twice = sum(1 for row in rows if events[row["run_id"]] > 1)
    result = {
        "dags": args.dags,
        "tasks_per_dag": len(SHAPE),
        "task_runs": n,
        "succeeded": sum(1 for row in rows if row["state"] == "succeeded"),
        "all_done_s": round(span, 4) if span else None,
        "releases_per_s": round(n / span, 1) if span else None,
        "release_latency_s": percentiles(latencies),
        "start_latency_s": percentiles(starts),
        "released_twice": released_twice,
        "never_released": sum(1 for row in rows if row["released"] is None),
        "dag_run_states_sample": dict(dag_states),
        "audit": {"missing": report.missing, "duplicated": report.duplicated},
        "cpu_us_per_task_run": floor.per_run(cpu, redis_used, n),
    }
    if args.burst_json:
        burst = json.loads(Path(args.burst_json).read_text())
        job_cost = (burst.get("cpu_us_per_run") or {}).get("total")
        if job_cost:
            result["cost_over_job_burst"] = round(
                result["cpu_us_per_task_run"]["total"] / job_cost, 2
            )
    cpu_line = result["cpu_us_per_task_run"]
    print(
        f"dag: {args.dags} DAG runs x {len(SHAPE)} tasks released at once: all done"
        f" {result['all_done_s']} s ({result['releases_per_s']} task releases/s)\n"
        f"  release latency p50 {result['release_latency_s']['p50']}"
        f"  p99 {result['release_latency_s']['p99']}  max {result['release_latency_s']['max']} s"
        " (released by the upstream's completion, in the same script)\n"
        f"  start latency (upstream done to downstream running) p50"
        f" {result['start_latency_s']['p50']}  p99 {result['start_latency_s']['p99']} s\n"
        f"  CPU per task run: node {cpu_line['node']} µs, workers {cpu_line['workers']} µs,"
        f" redis {cpu_line['redis']} µs; total {cpu_line['total']} µs"
        + (
            f" ({result['cost_over_job_burst']}x the job burst's)"
            if "cost_over_job_burst" in result
            else ""
        )
        + f"\n  exactly once: released twice {released_twice}, never released"
        f" {result['never_released']}, succeeded {result['succeeded']}/{n},"
        f" audit {result['audit']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if released_twice or result["never_released"] or report.missing or report.duplicated:
        print("EXACTLY-ONCE FAILED", file=sys.stderr)
        raise SystemExit(1)
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dag", help="DAG runs released at once: releases/s, release latency")
    p.add_argument("--redis", default=None, help="use this Redis instead of starting one")
    p.add_argument("--dags", type=int, default=1000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=1000)
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="always")
    p.add_argument("--lead", type=float, default=3.0, help="seconds of set-up before the boundary")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--command", dest="job_command", default="noop")
    p.add_argument("--burst-json", default=None, metavar="FILE", help="a burst's JSON to compare")
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
