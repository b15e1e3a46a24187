"""The stream floor in the steady state: what a bare Redis job queue costs a firing when
firings come one at a time, as they do at 830 a second over 64 shards.

The burst's floor (:mod:`.floor`) promotes 500 entries a call; here the same queue runs
the way the scheduler's steady state does. A producer process promotes each entry from
its shard's sorted set to the shard's stream as it comes due (the floor's minimal
script: ZRANGEBYSCORE, XADD, ZREM; one call per shard due at that instant) and pushes a
wake token in the same write. Consumer processes wait for a token (BLPOP), read that
shard's stream (XREADGROUP), then acknowledge (XACK): three round trips a firing, like a
worker's wait, claim and completion. No ledger, no fencing, no dedupe, no events, no
heartbeats. Measured: Redis's CPU above idle, the producer's and the consumers' CPU
above idle, each per firing; the burst floor on the same Redis beside it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import redis as redis_py

from shardsched.bench import floor
from shardsched.bench.harness import Procs

#: Entries a promote call moves at most (the burst floor's batch).
BATCH = floor.BATCH
BLPOP_TIMEOUT_S = 1


def _tokens(prefix: str) -> str:
    return f"{prefix}:tokens"


def produce(url: str, prefix: str, shards: int, rate: float, start_ms: int, count: int) -> None:
    """Entry i is due at ``start_ms + i / rate`` on shard ``i % shards``: at each due
    instant, promote the shards that have entries due, each with its token, one write."""
    r = redis_py.Redis.from_url(url)
    promote = r.register_script(floor.PROMOTE)
    secs, micros = r.time()
    offset_ms = secs * 1000 + micros / 1000 - time.time() * 1000  # server minus local
    i = 0
    while i < count and not r.exists(f"{prefix}:stop"):
        due_ms = start_ms + i * 1000 / rate
        wait = (due_ms - (time.time() * 1000 + offset_ms)) / 1000
        if wait > 0:
            time.sleep(wait)
        now_ms = time.time() * 1000 + offset_ms
        due: set[int] = set()
        while i < count and start_ms + i * 1000 / rate <= now_ms:
            due.add(i % shards)
            i += 1
        pipe = r.pipeline(transaction=False)
        for shard in due:
            promote(keys=floor.floor_keys(prefix, shard), args=[int(now_ms), BATCH], client=pipe)
            pipe.rpush(_tokens(prefix), shard)
        pipe.execute()


def wait_and_read(url: str, prefix: str, consumer: str) -> None:
    """A consumer: pop a token, read up to 5 entries of its shard, acknowledge them (the
    count goes with the acknowledgement); until told to stop."""
    r = redis_py.Redis.from_url(url)
    r.incr(f"{prefix}:ready-consumers")
    while not r.exists(f"{prefix}:stop"):
        token = r.blpop([_tokens(prefix)], timeout=BLPOP_TIMEOUT_S)
        if token is None:
            continue
        stream = floor.floor_keys(prefix, int(token[1]))[1]
        reply: Any = r.xreadgroup("g", consumer, {stream: ">"}, count=5)
        ids = [entry[0] for _, entries in reply or [] for entry in entries]
        if ids:
            pipe = r.pipeline(transaction=False)
            pipe.xack(stream, "g", *ids)
            pipe.incrby(f"{prefix}:read", len(ids))
            pipe.execute()


def measure(
    r: redis_py.Redis,
    url: str,
    rate: float,
    duration: float,
    idle: float,
    shards: int,
    consumers: int,
) -> dict[str, Any]:
    """The bare queue at ``rate`` firings a second for ``duration`` seconds: CPU per
    firing above idle (Redis, the producer, the consumers together)."""
    prefix = f"sfloor{int(time.time() * 1000) % 10**9}"
    pipe = r.pipeline(transaction=False)
    for shard in range(shards):
        pipe.xgroup_create(floor.floor_keys(prefix, shard)[1], "g", id="0", mkstream=True)
    pipe.execute()
    count = int(rate * (duration + 4))
    with Procs() as procs:
        for i in range(consumers):
            procs.start(
                f"consumer{i}",
                "bench", "steady-floor-consumer", "--redis", url,
                "--prefix", prefix, "--consumer", f"c{i}",
            )  # fmt: skip
        while int(r.get(f"{prefix}:ready-consumers") or 0) < consumers:
            time.sleep(0.01)
        time.sleep(1.0)
        cpu0 = {name: floor.cpu_seconds(p.pid) for name, p in procs.procs.items()}
        redis0, t0 = floor.redis_cpu(r), time.monotonic()
        time.sleep(idle)
        took = time.monotonic() - t0
        redis_idle = (floor.redis_cpu(r) - redis0) / took
        consumers_idle = sum(floor.cpu_seconds(p.pid) - cpu0[n] for n, p in procs.procs.items())
        consumers_idle /= took
        secs, micros = r.time()
        start_ms = secs * 1000 + micros // 1000 + 1500
        due: dict[int, dict[str, float]] = {}
        for i in range(count):
            due.setdefault(i % shards, {})[f"e{i}"] = start_ms + i * 1000 / rate
        pipe = r.pipeline(transaction=False)
        for shard, members in due.items():
            pipe.zadd(floor.floor_keys(prefix, shard)[0], members)
        pipe.execute()
        producer = procs.start(
            "producer",
            "bench", "steady-floor-producer", "--redis", url, "--prefix", prefix,
            "--shards", str(shards), "--rate", str(rate), "--start-ms", str(start_ms),
            "--count", str(count),
        )  # fmt: skip
        time.sleep(1.5 + 1.5)  # under way
        cpu0 = {name: floor.cpu_seconds(p.pid) for name, p in procs.procs.items()}
        read0 = int(r.get(f"{prefix}:read") or 0)
        redis0, t0 = floor.redis_cpu(r), time.monotonic()
        time.sleep(duration)
        took = time.monotonic() - t0
        busy = (floor.redis_cpu(r) - redis0) / took
        read = int(r.get(f"{prefix}:read") or 0) - read0
        cpu = {n: (floor.cpu_seconds(p.pid) - cpu0[n]) / took for n, p in procs.procs.items()}
        r.set(f"{prefix}:stop", 1)
        producer.wait(timeout=30)
    r.delete(*[k for s in range(shards) for k in floor.floor_keys(prefix, s)], _tokens(prefix))
    fired = read / took
    producer_cpu = cpu.pop("producer")
    consumer_cpu = sum(cpu.values())
    per = 1e6 / max(fired, 1)
    return {
        "firings_per_s": round(fired, 1),
        "redis_cpu_idle_s_per_s": round(redis_idle, 4),
        "redis_cpu_us_per_firing": round((busy - redis_idle) * per, 1),
        "producer_cpu_us_per_firing": round(producer_cpu * per, 1),
        "consumer_cpu_us_per_firing": round((consumer_cpu - consumers_idle) * per, 1),
    }


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("steady-floor-producer", help="(internal) the steady floor's producer")
    p.add_argument("--redis", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--start-ms", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.set_defaults(
        bench=lambda a: produce(a.redis, a.prefix, a.shards, a.rate, a.start_ms, a.count)
    )
    c = sub.add_parser("steady-floor-consumer", help="(internal) a steady floor consumer")
    c.add_argument("--redis", required=True)
    c.add_argument("--prefix", required=True)
    c.add_argument("--consumer", required=True)
    c.set_defaults(bench=lambda a: wait_and_read(a.redis, a.prefix, a.consumer))
