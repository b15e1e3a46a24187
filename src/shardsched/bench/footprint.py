"""``shardsched bench footprint``: Redis memory per registered job, and per run record.

Registers ``--jobs`` cron jobs (daily, so none fires) and reads ``used_memory`` before and
after; then fires ``--runs`` once-jobs through a node and a worker (noop) and reads the
growth per completed run record (record, run index entry, nothing left in the stream).
Finally it times a node restart: with the node stopped, ``--runs`` more once-jobs fall
due; a new node is started and the time until all of them are fired is the replay time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import redis as redis_py

from shardsched.bench.burst import server_ms, start_ready, wait_done
from shardsched.bench.harness import Procs, bench_redis
from shardsched.core.instants import from_ms
from shardsched.core.models import CronSchedule, JobSpec, OnceSchedule
from shardsched.sdk import Client


def used(r: redis_py.Redis) -> int:
    """Redis's memory less its clients' buffers: a connection's query or output buffer
    (a worker's claim reply in flight) moves ``used_memory`` by tens of kilobytes either
    way, more than 200 run records weigh, so it is not what the data costs."""
    info = r.info("memory")
    return int(info["used_memory"]) - int(info.get("mem_clients_normal", 0))


def run(args: argparse.Namespace) -> dict:
    extra = ("--hash-max-listpack-value", str(args.hash_max_listpack_value))
    with bench_redis(args.redis, "off", extra) as url, Procs() as procs:
        r = redis_py.Redis.from_url(url)
        ns = f"fp{int(time.time() * 1000) % 10**9}"
        client = Client(url, ns)
        before = used(r)
        client.add_jobs(
            (
                JobSpec(
                    name=f"nightly-report-{i}",
                    schedule=CronSchedule(expression="0 3 * * *"),
                    command="run_report.sh --tenant 42",
                )
                for i in range(args.jobs)
            ),
            batch=5000,
        )
        per_job = (used(r) - before) / args.jobs

        # The node and the worker start first, then the once-jobs are added due shortly
        # after: the memory before them is read while none has fired (a node that started
        # after their due time fired them before the read, and the read then counted their
        # stream entries, which completion deletes: a negative figure).
        common = ("--redis", url, "--namespace", ns)
        start_ready(procs, "node", "node", *common, "--node-id", "fp-node", "--no-http")
        start_ready(
            procs, "worker", "worker", *common, "--worker-id", "fp-w", "--concurrency", "1000"
        )
        due = server_ms(r) + 3000
        once = OnceSchedule(at=from_ms(due))
        client.add_jobs(
            (
                JobSpec(name=f"o{i}", schedule=once, command="handler:noop")
                for i in range(args.runs)
            ),
            batch=5000,
        )
        settled_before_runs = used(r)
        if server_ms(r) >= due:
            raise SystemExit("footprint: adding the once-jobs ran past their due time")
        wait_done(r, client, args.runs, due, timeout=120)
        per_run = (used(r) - settled_before_runs) / args.runs

        # Replay after a restart: due work piles up while no node runs, then one starts.
        procs.kill("node")
        due2 = server_ms(r) + 1000
        client.add_jobs(
            (
                JobSpec(
                    name=f"p{i}", schedule=OnceSchedule(at=from_ms(due2)), command="handler:noop"
                )
                for i in range(args.runs)
            ),
            batch=5000,
        )
        while server_ms(r) < due2 + 500:
            time.sleep(0.1)
        started = time.perf_counter()
        start_ready(procs, "node2", "node", *common, "--node-id", "fp-node", "--no-http")
        wait_done(r, client, 2 * args.runs, due2, timeout=120)
        replay_s = time.perf_counter() - started
        client.close()
        r.close()
    result = {
        "hash_max_listpack_value": args.hash_max_listpack_value,
        "jobs": args.jobs,
        "bytes_per_job": round(per_job),
        "runs": args.runs,
        "bytes_per_completed_run": round(per_run),
        "restart_replay": {"due_runs": args.runs, "seconds_from_node_start": round(replay_s, 3)},
    }
    print(
        f"footprint (hash-max-listpack-value {args.hash_max_listpack_value}): "
        f"{result['bytes_per_job']} bytes per registered job ({args.jobs} jobs); "
        f"{result['bytes_per_completed_run']} bytes per completed run record ({args.runs} runs); "
        f"node restart replayed {args.runs} due runs in {replay_s:.2f} s (process start included)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("footprint", help="Redis memory per job and per run; restart replay")
    p.add_argument("--redis", default=None)
    p.add_argument("--jobs", type=int, default=500_000)
    p.add_argument("--runs", type=int, default=25_000)
    p.add_argument(
        "--hash-max-listpack-value",
        type=int,
        default=1024,
        help="the Redis setting (shardsched dev uses 1024; Redis's own default is 64)",
    )
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
