"""``shardsched bench soak``: the seed's steady load with a short retention; memory must
plateau while the archive grows.

``--rate`` interval jobs every second (phases spread over the second, as ``bench
steady``; ``--backlog N`` adds N finished runs of 1,000 other jobs, past their retention,
for the owner to clean up while it fires), a node started with ``--archive`` (a
temporary directory unless given) and ``--retention-s``, and workers running them
(noop). Every ``--sample-every`` seconds it records Redis ``used_memory`` and the rows
in the archive. Once the first retention window has passed, runs leave Redis as fast as
they come, so memory stops growing: the result compares the memory growth of the last
stretch with what keeping every run would add (the rate times a hot run's bytes):
``plateau`` is true when memory after the first window grows less than a tenth as fast.
The stretch is every sample after the first window, not only the last ones: retention
passes make memory a saw-tooth, and a slope fitted to a few of its teeth is noise. At the end
the jobs are paused and the audit, which reads the archive, must find every tick fired
once across the archive boundary. The
trigger lag of every tick (from the archive and Redis) is split into the clean-up of
the backlog and after it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import redis as redis_py

from shardsched.bench.harness import Procs, bench_redis, server_ms, start_ready
from shardsched.bench.steady import spread_jobs
from shardsched.core.ids import parse_run_id
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops.history import audit
from shardsched.sdk import Client
from shardsched.store.deployment import Deployment


class ArchiveRows:
    """Rows archived so far under a local archive, reading each new file's footer once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: dict[Path, int] = {}

    def count(self) -> tuple[int, int]:
        """(rows, bytes) of the runs archived so far."""
        for path in (self.root / "runs").rglob("*.parquet"):
            if path not in self.seen:
                self.seen[path] = pq.read_metadata(path).num_rows
        return sum(self.seen.values()), sum(p.stat().st_size for p in self.seen)


def preload(r: redis_py.Redis, dep: Deployment, job_ids: list[str], n: int, before_ms: int) -> None:
    """``n`` finished runs spread over the jobs, scheduled and finished long before
    ``before_ms`` (marked backfill runs, so the audit counts no tick for them)."""
    per_job = -(-n // len(job_ids))
    pipe = r.pipeline(transaction=False)
    made = 0
    for job_id in job_ids:
        sk = dep.keys_for(job_id)
        for i in range(min(per_job, n - made)):
            tick = before_ms - (i + 1) * 1000
            rid = f"{job_id}:{tick}:1"
            record: dict[Any, Any] = {"st": "succeeded", "c": tick, "b": tick + 2,
                                      "f": tick + 5, "w": "preload", "bf": "1", "v": 1}  # fmt: skip
            pipe.hset(sk.run(rid), mapping=record)
            pipe.zadd(sk.runs_of(job_id), {rid: tick})
            made += 1
            if made % 5000 == 0:
                pipe.execute()
    pipe.execute()


def tick_lags(
    r: redis_py.Redis, dep: Deployment, job_ids: list[str], root: Path, since_ms: int
) -> list[tuple[int, int]]:
    """(tick, trigger lag) in ms of every first attempt scheduled since ``since_ms``, from
    the archive and the runs still hot."""
    created: dict[str, tuple[int, int]] = {}
    if (root / "runs").exists():
        table = ds.dataset(root / "runs", format="parquet", partitioning="hive").to_table(
            columns=["run_id", "attempt", "scheduled_for", "created_at"]
        )
        for row in table.to_pylist():
            tick = round(row["scheduled_for"].timestamp() * 1000)
            if row["attempt"] == 1 and tick >= since_ms:
                created[row["run_id"]] = (tick, round(row["created_at"].timestamp() * 1000))
    for job_id in job_ids:
        sk = dep.keys_for(job_id)
        members: list[bytes] = r.zrange(sk.runs_of(job_id), 0, -1)  # type: ignore[assignment]  # bytes: no decode_responses
        rids = [m.decode() for m in members]
        pipe = r.pipeline(transaction=False)
        for rid in rids:
            pipe.hget(sk.run(rid), "c")
        for rid, c in zip(rids, pipe.execute(), strict=True):
            tick = int(parse_run_id(rid).tick)
            if c is not None and rid.endswith(":1") and tick >= since_ms:
                created[rid] = (tick, int(c))
    return sorted((tick, c - tick) for tick, c in created.values())


def lag_stats(lags_ms: list[int]) -> dict[str, float | int | None]:
    ordered = sorted(lags_ms)

    def pct(p: float) -> float | None:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] / 1000 if ordered else None

    return {"ticks": len(ordered), "p50": pct(0.5), "p99": pct(0.99),
            "max": ordered[-1] / 1000 if ordered else None}  # fmt: skip


def memory_by_kind(r: redis_py.Redis, ns: str) -> dict[str, int]:
    """Redis memory of the namespace's keys by kind (``run``, ``runs``, ``events``…), to
    show what a plateau is made of."""
    out: dict[str, int] = {}
    keys = list(r.scan_iter(match=f"{ns}:*", count=1000))
    for i in range(0, len(keys), 1000):
        batch = keys[i : i + 1000]
        pipe = r.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
        for key, size in zip(batch, pipe.execute(), strict=True):
            kind = key.decode().split("}:", 1)[-1].split(":", 1)[0]
            out[kind] = out.get(kind, 0) + int(size or 0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _slope(samples: list[dict[str, Any]], key: str) -> float:
    """Least-squares growth of ``key`` per second over the samples."""
    if len(samples) < 2:
        return 0.0
    xs = [s["t_s"] for s in samples]
    ys = [s[key] for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp, bench_redis(args.redis, args.fsync) as url:
        root = Path(args.archive or Path(tmp) / "archive").resolve()
        with Procs() as procs:
            result = _soak(args, url, root, procs)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        plot(args.plot, result)
    if result["audit"]["missing"] or result["audit"]["dup"]:
        raise SystemExit(1)
    return result


def _soak(args: argparse.Namespace, url: str, root: Path, procs: Procs) -> dict:
    r = redis_py.Redis.from_url(url)
    ns = f"soak{int(time.time() * 1000) % 10**9}"
    client = Client(url, ns)
    old_ids: list[str] = []
    if args.backlog:  # history already past its retention: the owner's clean-up at start
        began = time.monotonic()
        never = OnceSchedule(at=datetime(2100, 1, 1, tzinfo=UTC))  # jobs with only a past
        past = client.add_jobs(
            (JobSpec(name=f"past-{i}", command="true", schedule=never) for i in range(1000)),
            batch=1000,
        )
        old_ids[:] = [c.job_id for c in past]
        preload(r, client.deployment, old_ids, args.backlog, server_ms(r) - 3_600_000)
        print(f"soak: {args.backlog} finished runs preloaded in {time.monotonic() - began:.1f} s")
    start = from_ms(server_ms(r) + round(args.lead * 1000))
    created = client.add_jobs(spread_jobs("soak", args.rate, start), batch=2000)
    job_ids = [c.job_id for c in created]
    common = ("--redis", url, "--namespace", ns)
    retention = ("--archive", f"file://{root}", "--retention-s", str(args.retention_s),
                 "--retention-every", str(args.retention_every))  # fmt: skip
    start_ready(procs, "node", "node", *common, *retention, "--node-id", "soak-node", "--no-http")
    for i in range(args.workers):
        start_ready(procs, f"worker{i}", "worker", *common, "--worker-id", f"soak-w{i}",
                    "--concurrency", "200")  # fmt: skip
    rows = ArchiveRows(root)
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    # the soak lasts `duration` from the later of the first tick and the fleet being ready
    # (a slow start on a loaded box must not leave it without a single sample)
    end_ms = max(int(start.timestamp() * 1000), server_ms(r)) + round(args.duration * 1000)
    print(f"soak: {args.rate} triggers/s for {args.duration:.0f} s, retention {args.retention_s} s")
    print(f"{'t (s)':>7} {'used_memory (MiB)':>18} {'hot runs':>10} {'backlog':>9} "
          f"{'archived rows':>14} {'archive (MiB)':>14}")  # fmt: skip
    dep = client.deployment
    while (now := server_ms(r)) < end_ms:
        archived, size = rows.count()
        memory = int(r.info("memory")["used_memory"])
        pipe = r.pipeline(transaction=False)
        for job_id in job_ids + old_ids:
            pipe.zcard(dep.keys_for(job_id).runs_of(job_id))
        counts = pipe.execute()
        hot, backlog = sum(counts[: len(job_ids)]), sum(counts[len(job_ids) :])
        sample = {"t_s": round(time.monotonic() - t0, 1), "server_ms": now, "used_memory": memory,
                  "hot_runs": hot, "backlog_left": backlog, "archived_rows": archived,
                  "archive_bytes": size}  # fmt: skip
        samples.append(sample)
        print(f"{sample['t_s']:>7.0f} {memory / 2**20:>18.1f} {hot:>10} {backlog:>9} "
              f"{archived:>14} {size / 2**20:>14.2f}")  # fmt: skip
        time.sleep(args.sample_every)
    breakdown = memory_by_kind(r, ns)
    # lags from the 10th second on: the first ticks wait for the node's first leases
    lags = tick_lags(r, dep, job_ids, root, int(start.timestamp() * 1000) + 10_000)
    cleaned = next((s["server_ms"] for s in samples if s["backlog_left"] == 0), None)
    for job in created:  # stop firing, let the last runs finish, then audit both tiers
        client.pause(job.job_id)
    time.sleep(2.0)
    report = client._run(audit.audit(client.deployment, settle_s=0.5))
    procs.stop_all()
    client.close()
    r.close()
    warm = args.lead + args.retention_s + 2 * args.retention_every  # the first window, + passes
    first = [s for s in samples if s["t_s"] <= warm]
    tail = [s for s in samples if s["t_s"] > warm]
    growth_first, growth_tail = _slope(first, "used_memory"), _slope(tail, "used_memory")
    # what keeping every run would add a second: the rate times a hot run's bytes
    per_run = sum(breakdown.get(kind, 0) for kind in ("run", "runs", "out"))
    per_run /= max(1, samples[-1]["hot_runs"] + samples[-1]["backlog_left"])
    unbounded = args.rate * per_run
    last = samples[-1]
    return {
        "rate_per_s": args.rate,
        "duration_s": args.duration,
        "retention_s": args.retention_s,
        "lead_s": args.lead,
        "fsync": args.fsync,
        "samples": samples,
        "used_memory_growth_first_window_bytes_per_s": round(growth_first),
        "used_memory_growth_after_first_window_bytes_per_s": round(growth_tail),
        "used_memory_growth_if_kept_bytes_per_s": round(unbounded),
        "plateau": bool(tail) and growth_tail < unbounded / 10,
        "archive_rows_per_s_after_first_window": round(_slope(tail, "archived_rows"), 1),
        "archive_bytes_per_row": round(last["archive_bytes"] / max(1, last["archived_rows"]), 1),
        "memory_by_key_kind_bytes": breakdown,
        "backlog_runs": args.backlog,
        "backlog_cleaned_after_s": None
        if cleaned is None or not args.backlog
        else round((cleaned - samples[0]["server_ms"]) / 1000, 1),
        "trigger_lag_during_cleanup_s": lag_stats(
            [lag for tick, lag in lags if cleaned is not None and tick < cleaned]
        ) if args.backlog else None,
        "trigger_lag_after_cleanup_s": lag_stats(
            [lag for tick, lag in lags if cleaned is None or tick >= cleaned + 5000]
        ),
        "audit": {"fired": report.fired, "missing": report.missing, "dup": report.duplicated},
    }  # fmt: skip


def plot(path: str, result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["samples"]
    t = [s["t_s"] for s in samples]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(t, [s["used_memory"] / 2**20 for s in samples], label="Redis used_memory (MiB)")
    ax.set_xlabel("seconds")
    ax.set_ylabel("MiB")
    first = result["lead_s"] + result["retention_s"]
    ax.axvline(first, color="grey", linestyle=":", label="first runs pass the retention")
    twin = ax.twinx()
    twin.plot(t, [s["archived_rows"] for s in samples], color="tab:orange", label="archived runs")
    twin.set_ylabel("runs in the archive")
    ax.legend(loc="upper left")
    twin.legend(loc="lower right")
    ax.set_title(f"soak: {result['rate_per_s']} triggers/s, retention {result['retention_s']} s")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("soak", help="steady load with a short retention: memory must plateau")
    p.add_argument("--redis", default=None)
    p.add_argument("--rate", type=int, default=830, help="triggers per second")
    p.add_argument("--duration", type=float, default=300.0, help="seconds")
    p.add_argument("--retention-s", type=int, default=60, help="the node's --retention-s")
    p.add_argument("--retention-every", type=float, default=5.0, help="the node's (seconds)")
    p.add_argument("--archive", default=None, metavar="DIR", help="default: a temporary one")
    p.add_argument("--sample-every", type=float, default=5.0, help="seconds")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--backlog", type=int, default=0, metavar="N",
                   help="finished runs past their retention to preload (the owner cleans up "
                   "while firing)")  # fmt: skip
    p.add_argument("--lead", type=float, default=5.0, help="seconds before the first tick")
    p.add_argument("--fsync", choices=["always", "everysec", "off"], default="everysec")
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument("--plot", default=None, metavar="PNG")
    p.set_defaults(bench=run)
