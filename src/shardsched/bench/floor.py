"""The floors a burst is judged against, measured on the same Redis in the same run, and
where the CPU of a run goes.

- **The stream floor**: what a bare Redis job queue needs for the same burst. Every
  shard's due entries are promoted from a sorted set to the shard's stream by a
  minimal Lua script (ZRANGEBYSCORE, XADD, ZREM; no ledger, no fencing, no dedupe),
  batches of 500, while as many consumer processes as the burst has workers read the
  streams with XREADGROUP COUNT 500 and XACK what they read. "All started" of the floor
  is the time from the first promote until the consumers have read every entry.
- **The scripts alone**: fire, claim and complete each run over n fresh runs on their own
  (batches of 500, one client, back to back), timed and with Redis's own CPU measured
  around each (``INFO cpu``): Redis's cost per run, split by script.
- **CPU of a process**: user + system seconds from ``/proc/<pid>/stat``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import redis as redis_py

from shardsched.bench.harness import Procs
from shardsched.core.models import Overlap
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.lua import firing
from shardsched.store.lua import runs as runs_lua
from shardsched.store.scripts import fcall

BATCH = 500
#: The floor's promote: due entries of one shard's sorted set to its stream.
PROMOTE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'r', id)
end
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
end
return #due
"""
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU a process has used (all its threads, not its children), to the nanosecond from
    each thread's schedstat; /proc/<pid>/stat counts whole clock ticks (10 ms), more than
    300 no-op runs of a frozen-heap worker take."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):  # a kernel without schedstats
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK


def redis_cpu(r: redis_py.Redis) -> float:
    """Redis's CPU seconds so far (all its threads), from INFO cpu."""
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def run_call(r: redis_py.Redis, call: Call) -> Any:
    assert call.script is not None
    return r.execute_command(*fcall(call.script, call.keys, call.args))


def floor_keys(prefix: str, shard: int) -> tuple[str, str]:
    """A floor shard's (due sorted set, ready stream)."""
    return f"{prefix}:{{{shard}}}:due", f"{prefix}:{{{shard}}}:ready"


def stream_floor(
    r: redis_py.Redis, url: str, n: int, shards: int, consumers: int
) -> dict[str, Any]:
    """The bare queue's burst: seconds until ``consumers`` processes have read all ``n``
    entries, and the CPU per entry of the consumers and of Redis."""
    prefix = f"floor{int(time.time() * 1000) % 10**9}"
    pipe = r.pipeline(transaction=False)
    for shard in range(shards):
        due, ready = floor_keys(prefix, shard)
        members = {f"e{i}": 0 for i in range(shard, n, shards)}
        if members:
            pipe.zadd(due, members)
        pipe.xgroup_create(ready, "g", id="0", mkstream=True)
    pipe.execute()
    promote = r.register_script(PROMOTE)
    with Procs() as procs:
        for i in range(consumers):
            procs.start(
                f"consumer{i}",
                "bench", "floor-consumer", "--redis", url,
                "--prefix", prefix, "--shards", str(shards), "--consumer", f"c{i}",
            )  # fmt: skip
        while int(r.get(f"{prefix}:ready-consumers") or 0) < consumers:
            time.sleep(0.01)
        cpu0 = {name: cpu_seconds(p.pid) for name, p in procs.procs.items()}
        redis0 = redis_cpu(r)
        start = time.perf_counter()
        left = set(range(shards))
        while left:
            for shard in list(left):
                if promote(keys=floor_keys(prefix, shard), args=[1, BATCH]) < BATCH:
                    left.discard(shard)
        while int(r.get(f"{prefix}:read") or 0) < n:
            time.sleep(0.001)
        elapsed = time.perf_counter() - start
        consumer_cpu = sum(cpu_seconds(p.pid) - cpu0[name] for name, p in procs.procs.items())
        redis_used = redis_cpu(r) - redis0
        r.set(f"{prefix}:stop", 1)
    r.delete(*[k for s in range(shards) for k in floor_keys(prefix, s)])
    return {
        "all_started_s": round(elapsed, 4),
        "consumer_cpu_us_per_run": round(consumer_cpu / n * 1e6, 1),
        "redis_cpu_us_per_run": round(redis_used / n * 1e6, 1),
    }


def consume(url: str, prefix: str, shards: int, consumer: str) -> None:
    """A floor consumer: read every shard's stream, acknowledge, count; until told."""
    r = redis_py.Redis.from_url(url)
    streams: dict[Any, Any] = {floor_keys(prefix, s)[1]: ">" for s in range(shards)}
    r.incr(f"{prefix}:ready-consumers")
    while not r.exists(f"{prefix}:stop"):
        reply: Any = r.xreadgroup("g", consumer, streams, count=BATCH, block=10)
        read = 0
        pipe = r.pipeline(transaction=False)
        for stream, entries in reply or []:
            if entries:
                pipe.xack(stream, "g", *[entry[0] for entry in entries])
                read += len(entries)
        if read:
            pipe.incrby(f"{prefix}:read", read)
            pipe.execute()


def _seed(
    r: redis_py.Redis, dep: Deployment, n: int, prefix: str, with_jobs: bool = False
) -> tuple[int, dict[int, list[str]]]:
    """n timer entries due a second ago on fresh keys, each shard's epoch 1 (and, with
    ``with_jobs``, a job hash for each, which claim reads): the due tick and the jobs by
    shard."""
    tick = int(r.time()[0]) * 1000 - 1000
    per_shard: dict[int, list[str]] = {}
    for i in range(n):
        job = f"{prefix}{i}"
        per_shard.setdefault(dep.keys_for(job).shard, []).append(job)
    pipe = r.pipeline(transaction=False)
    for shard, jobs in per_shard.items():
        sk = dep.shard(shard)
        pipe.set(sk.epoch, 1)
        pipe.zadd(sk.timer, {job: tick for job in jobs})
        for job in jobs if with_jobs else ():
            pipe.hset(sk.job(job), mapping={"spec": '{"command":"true"}', "lease": 30000})
    pipe.execute()
    return tick, per_shard


def fire_calls(
    dep: Deployment, tick: int, per_shard: dict[int, list[str]], batch: int = BATCH
) -> list[Call]:
    """fire.lua over seeded jobs (:func:`_seed`), ``batch`` a call, each fired at ``tick``."""
    fires = []
    for shard, jobs in per_shard.items():
        for i in range(0, len(jobs), batch):
            items = [
                firing.plan(job, tick, tick, tick + 60_000, None, Overlap.ALLOW)  # as fire_floor
                for job in jobs[i : i + batch]
            ]
            fires.append(
                firing.fire(
                    dep.shard(shard), epoch=1, count=batch, lookahead_ms=0, missed=0, items=items
                )
            )
    return fires


def claim_calls(dep: Deployment, per_shard: dict[int, list[str]], batch: int = BATCH) -> list[Call]:
    """claim.lua for every fired run, ``batch`` a call."""
    return [
        runs_lua.claim(dep.shard(shard), dep.globals, "floor-worker", batch)
        for shard, jobs in per_shard.items()
        for _ in range(0, len(jobs), batch)
    ]


def complete_calls(dep: Deployment, claimed: list[Any]) -> list[Call]:
    """complete.lua for every claimed run, succeeded, one call per claim's reply."""
    completes = []
    for reply in claimed:
        entries = runs_lua.decode_claimed(reply)
        if not entries:
            continue
        done = [
            runs_lua.Completion(
                runs_lua.Delivery(e.entry_id, e.run_id, e.token), "succeeded", 0, "", b"", None, ""
            )
            for e in entries
        ]
        sk = dep.keys_for(entries[0].run_id)
        completes.append(runs_lua.complete(sk, dep.globals, "floor-worker", done))
    return completes


def script_costs(r: redis_py.Redis, namespace: str, shards: int, n: int) -> dict[str, Any]:
    """fire, claim and complete each over n fresh runs on their own: wall seconds and
    Redis CPU per run, per script (one client, batches of 500, back to back)."""
    dep = Deployment(namespace + "-scripts", shards)
    tick, per_shard = _seed(r, dep, n, "s", with_jobs=True)
    costs: dict[str, Any] = {}

    def measured(name: str, calls: list[Call]) -> list[Any]:
        cpu0, start = redis_cpu(r), time.perf_counter()
        replies = [run_call(r, call) for call in calls]
        wall, cpu = time.perf_counter() - start, redis_cpu(r) - cpu0
        costs[name] = {
            "wall_s": round(wall, 4),
            "redis_cpu_us_per_run": round(cpu / n * 1e6, 1),
        }
        return replies

    measured("fire", fire_calls(dep, tick, per_shard))
    claimed = measured("claim", claim_calls(dep, per_shard))
    measured("complete", complete_calls(dep, claimed))
    costs["redis_cpu_us_per_run"] = round(
        sum(c["redis_cpu_us_per_run"] for c in costs.values() if isinstance(c, dict)), 1
    )
    return costs


def fire_floor(r: redis_py.Redis, deployment: Deployment, n: int, batch: int = BATCH) -> float:
    """The batched fire script alone: n fires, back to back, one client, on fresh keys."""
    dep = Deployment(deployment.namespace + "-floor", deployment.n_shards)
    tick, per_shard = _seed(r, dep, n, "floor")
    calls = []
    for shard, jobs in per_shard.items():
        sk = dep.shard(shard)
        for i in range(0, len(jobs), batch):
            items: list[Any] = []
            for job in jobs[i : i + batch]:
                items += firing.plan(job, tick, tick, tick + 60_000, None, Overlap.ALLOW)
            keys = (sk.timer, sk.ready, sk.epoch, sk.stats, sk.retries, sk.autopause)
            calls.append((keys, (1, sk.base, batch, 0, 0, *items)))
    start = time.perf_counter()
    for keys, args in calls:
        r.execute_command(*fcall("fire", keys, args))
    return time.perf_counter() - start


def per_run(cpu: dict[str, float], redis_cpu: float, n: int) -> dict[str, float]:
    """CPU microseconds per run of the burst phase: node(s), workers, Redis, in all."""
    node = sum(v for k, v in cpu.items() if k.startswith("node"))
    workers = sum(v for k, v in cpu.items() if k.startswith("worker"))
    out = {"node": node, "workers": workers, "redis": redis_cpu}
    out["total"] = node + workers + redis_cpu
    return {k: round(v / n * 1e6, 1) for k, v in out.items()}


def report_lines(r: dict) -> list[str]:
    """The burst report's lines about CPU and the floors."""
    lines = []
    cpu = r.get("cpu_us_per_run")
    if cpu:
        lines.append(
            f"  CPU per run (burst phase): node {cpu['node']} µs, workers {cpu['workers']} µs,"
            f" redis {cpu['redis']} µs; total {cpu['total']} µs"
        )
    if r.get("stream_floor"):
        sf = r["stream_floor"]
        lines.append(
            f"  stream floor: all read {sf['all_started_s']} s, the median of"
            f" {sf.get('all_started_s_rounds', [])} (consumers"
            f" {sf['consumer_cpu_us_per_run']} µs, redis {sf['redis_cpu_us_per_run']} µs per run);"
            f" all started / floor = {r['started_over_stream_floor']}"
        )
    if r.get("scripts"):
        sc = r["scripts"]
        lines.append(
            "  redis per script: "
            + ", ".join(
                f"{k} {sc[k]['redis_cpu_us_per_run']} µs" for k in ("fire", "claim", "complete")
            )
            + f" (per run; {sc['redis_cpu_us_per_run']} µs in all)"
        )
    return lines


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("floor-consumer", help="(internal) a consumer of the stream floor")
    p.add_argument("--redis", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--consumer", required=True)
    p.set_defaults(bench=lambda a: consume(a.redis, a.prefix, a.shards, a.consumer))


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run as: shardsched bench floor-consumer …")
