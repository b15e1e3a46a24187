"""``shardsched bench archive``: the cold archive's size per run and write rate.

Writes ``--runs`` finished runs of ``--jobs`` jobs (a one-line output with numbers in it
each, a failure in twenty) to a local archive in batches of ``--batch`` per shard, as
the owner archives a slice, then reads one job's runs back. The bytes per run it prints
is what ``bench plan`` sizes the archive with.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shardsched.core.models import RunState
from shardsched.core.views import Run
from shardsched.store.archive import Archive


def _runs(n: int, jobs: int, start: datetime) -> list[tuple[Run, bytes]]:
    rng = random.Random(7)
    out = []
    for i in range(n):
        job = f"job_{i % jobs:012x}"
        at = start + timedelta(seconds=i * 60 // jobs)
        failed = rng.random() < 0.05
        out.append(
            (
                Run(
                    run_id=f"{job}:{int(at.timestamp() * 1000)}:1",
                    job_id=job,
                    dag_run_id=None,
                    scheduled_for=at,
                    state=RunState.FAILED if failed else RunState.SUCCEEDED,
                    attempt=1,
                    claimed_by=f"worker-{rng.randrange(100)}",
                    lease_expires_at=None,
                    created_at=at,
                    started_at=at + timedelta(milliseconds=rng.randrange(2, 40)),
                    finished_at=at + timedelta(milliseconds=rng.randrange(50, 5000)),
                    exit_code=1 if failed else 0,
                    reason="exit 1" if failed else None,
                    job_version=1,
                ),
                (
                    f"error: upstream timed out after {rng.randrange(1, 30)} s\n"
                    if failed
                    else f"processed {rng.randrange(10**6)} rows in {rng.random():.3f} s\n"
                ).encode(),
            )
        )
    return out


def run(args: argparse.Namespace) -> dict:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    rows = _runs(args.runs, args.jobs, start)
    with tempfile.TemporaryDirectory() as root:
        archive = Archive(f"file://{root}")
        began = time.perf_counter()
        for i in range(0, len(rows), args.batch):
            archive.write(i // args.batch % args.shards, rows[i : i + args.batch], start)
        write_s = time.perf_counter() - began
        size = sum(p.stat().st_size for p in Path(root).rglob("*.parquet"))
        began = time.perf_counter()
        found = archive.runs_of(0, rows[0][0].job_id)
        read_s = time.perf_counter() - began
    result = {
        "runs": args.runs,
        "jobs": args.jobs,
        "batch": args.batch,
        "bytes": size,
        "bytes_per_run": round(size / args.runs, 1),
        "write_runs_per_s": round(args.runs / write_s),
        "read_one_job_s": round(read_s, 3),
        "read_one_job_runs": len(found),
    }
    print(
        f"archive: {args.runs:,} runs in batches of {args.batch}: {size / 2**20:.1f} MiB, "
        f"{result['bytes_per_run']} B/run, written at {result['write_runs_per_s']:,} runs/s; "
        f"one job's {len(found)} runs of shard 0 read back in {read_s:.3f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("archive", help="cold archive size per run and write rate (Parquet)")
    p.add_argument("--runs", type=int, default=200_000)
    p.add_argument("--jobs", type=int, default=2_000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
