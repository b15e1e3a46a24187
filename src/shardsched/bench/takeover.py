"""``shardsched bench takeover``: time from a node's kill -9 to its shards firing elsewhere.

Three nodes (default lease TTL and renewal) own a deployment in which every shard has
ticks every half second. Each round kills one node with SIGKILL, reads the server's clock,
and watches the dead node's shards' ready streams for the first entry appended after the
kill; the round's figure is the slowest of those shards. The node is restarted and the
shards rebalanced before the next round.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import redis as redis_py

from shardsched import IntervalSchedule, JobSpec
from shardsched.bench.harness import Procs, bench_redis, median
from shardsched.sdk import Client
from shardsched.shard.manager import HEARTBEAT_EVERY_S


def _owners(r: redis_py.Redis, client: Client) -> dict[int, str | None]:
    dep = client.deployment
    values: list[bytes | None] = r.mget([dep.shard(s).owner for s in range(dep.n_shards)])  # type: ignore[assignment]  # bytes: no decode_responses
    return {s: (v.decode() if v else None) for s, v in enumerate(values)}


def _wait_balanced(r: redis_py.Redis, client: Client, nodes: set[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owners = _owners(r, client)
        counts = {n: list(owners.values()).count(n) for n in nodes}
        if set(owners.values()) == nodes and max(counts.values()) - min(counts.values()) <= 1:
            return
        time.sleep(0.1)
    raise TimeoutError(f"shards not balanced over {sorted(nodes)}")


def run(args: argparse.Namespace) -> dict:
    with bench_redis(args.redis) as url, Procs() as procs:
        ns = f"takeover{int(time.time())}"
        client = Client(url, ns)
        r = redis_py.Redis.from_url(url)
        client.add_jobs(
            JobSpec(name=f"t{i}", schedule=IntervalSchedule(every_s=0.5), command="true")
            for i in range(args.jobs)
        )
        node_args = [
            "--redis",
            url,
            "--namespace",
            ns,
            "--no-http",
            "--lease-ttl",
            str(args.lease_ttl),
            "--renew-every",
            str(args.renew_every),
        ]
        names = ["n1", "n2", "n3"]
        for name in names:
            procs.start(name, "node", "--node-id", name, *node_args)
        _wait_balanced(r, client, set(names))
        dep = client.deployment
        rounds = []
        for i in range(args.rounds):
            victim = names[i % 3]
            shards = [
                s
                for s, o in _owners(r, client).items()
                if o == victim and r.zcard(dep.shard(s).timer) > 0  # shards with ticks only
            ]
            procs.kill(victim)
            sec, usec = r.time()
            killed_ms = sec * 1000 + usec // 1000
            first_new: dict[int, int] = {}
            deadline = time.monotonic() + 60
            while len(first_new) < len(shards) and time.monotonic() < deadline:
                for s in shards:
                    if s in first_new:
                        continue
                    entries: list[Any] = r.xrange(
                        dep.shard(s).ready, min=f"{killed_ms + 1}-0", count=1
                    )  # type: ignore[assignment]  # redis-py types replies as a union
                    if entries:
                        first_new[s] = int(entries[0][0].split(b"-")[0])
                time.sleep(0.01)
            gap = (max(first_new.values()) - killed_ms) / 1000
            rounds.append(gap)
            print(
                f"round {i + 1}: killed {victim} ({len(shards)} shards) -> all firing again "
                f"after {gap:.2f} s",
                flush=True,
            )
            procs.start(victim, "node", "--node-id", victim, *node_args)
            _wait_balanced(r, client, set(names))
        client.close()
        r.close()
    # lease traffic: each node renews its shards' leases every renew_every_s (one call a
    # shard) and heartbeats every HEARTBEAT_EVERY_S (one call)
    shards = dep.n_shards
    nodes = len(names)
    lease_calls = shards / args.renew_every + nodes / HEARTBEAT_EVERY_S
    result = {
        "lease_ttl_s": args.lease_ttl,
        "renew_every_s": args.renew_every,
        "heartbeat_every_s": HEARTBEAT_EVERY_S,
        "jobs": args.jobs,
        "rounds_s": rounds,
        "median_s": median(rounds),
        "lease_calls_per_s": round(lease_calls, 1),
    }
    print(
        f"kill -9 -> firing elsewhere: median {result['median_s']} s over {len(rounds)} rounds "
        f"(lease TTL {args.lease_ttl} s, renewal every {args.renew_every} s, heartbeat every"
        f" {HEARTBEAT_EVERY_S} s; lease calls {result['lease_calls_per_s']}/s for {shards}"
        f" shards and {nodes} nodes)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("takeover", help="kill -9 a node; time until its shards fire elsewhere")
    p.add_argument("--redis", default=None, help="use this Redis instead of starting one")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--jobs", type=int, default=640)
    p.add_argument("--lease-ttl", type=float, default=5.0)
    p.add_argument("--renew-every", type=float, default=2.0)
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
