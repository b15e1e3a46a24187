"""``shardsched bench auth``: what the token check costs an HTTP request.

Two router processes on one Redis, one checking tokens and one started with
``--insecure-no-auth`` (loopback), answer ``GET /api/v1/jobs/{id}`` from one client,
sequentially over a kept-alive connection, in interleaved rounds so the box's noise falls
on both alike. The check is one ``HGET`` of the token's SHA-256 (no cache, so a revoke
holds on the next request) and the scope test; the burst path (fire, claim, complete)
never goes through HTTP and so does not pay it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from shardsched.bench.harness import bench_redis, percentiles
from shardsched.core.models import CronSchedule, JobSpec
from shardsched.runtime.lifeline import child_env
from shardsched.runtime.redis_server import free_port
from shardsched.sdk import Client


def _router(url: str, namespace: str, port: int, *extra: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "shardsched", "router", "--redis", url]
    args += ["--namespace", namespace, "--http", f"127.0.0.1:{port}", *extra]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, env=child_env())


def _wait_ready(base: str) -> None:
    import httpx  # the bench extra's (pip install 'shardsched[bench]')

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"router at {base} did not start")


def run(args: argparse.Namespace) -> dict:
    import httpx  # the bench extra's: imported here, so `bench --help` works without it

    namespace = f"benchauth{int(time.time()) % 10**6}"
    with bench_redis(args.redis, "off") as url:
        with Client(url, namespace) as sdk:
            spec = JobSpec(name="a", schedule=CronSchedule(expression="0 3 * * *"), command="true")
            job_id = sdk.add_job(spec).job_id
        create = ["tokens", "create", "bench", "--scope", "read", "--namespace", namespace]
        made = subprocess.run(
            [sys.executable, "-m", "shardsched", *create, "--redis", url],
            capture_output=True,
            text=True,
            check=True,
            env=child_env(),
        )
        token = made.stdout.strip()
        ports = {"auth": free_port(), "no_auth": free_port()}
        procs = [
            _router(url, namespace, ports["auth"]),
            _router(url, namespace, ports["no_auth"], "--insecure-no-auth"),
        ]
        samples: dict[str, list[float]] = {"auth": [], "no_auth": []}
        try:
            clients = {}
            for mode, port in ports.items():
                base = f"http://127.0.0.1:{port}"
                _wait_ready(base)
                headers = {"authorization": f"Bearer {token}"} if mode == "auth" else {}
                clients[mode] = httpx.Client(base_url=base, headers=headers, timeout=10)
            path = f"/api/v1/jobs/{job_id}"
            for mode in clients:  # warm both up: connections, imports, caches
                for _ in range(200):
                    clients[mode].get(path).raise_for_status()
            for round_no in range(args.rounds):
                order = list(clients) if round_no % 2 == 0 else list(reversed(clients))
                for mode in order:
                    c = clients[mode]
                    for _ in range(args.requests):
                        start = time.perf_counter()
                        c.get(path).raise_for_status()
                        samples[mode].append((time.perf_counter() - start) * 1000)
            for c in clients.values():
                c.close()
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=10)
    stats = {mode: percentiles(values) for mode, values in samples.items()}
    result = {
        "requests_per_mode": len(samples["auth"]),
        "rounds": args.rounds,
        "ms": stats,
        "p50_added_ms": _added(stats, "p50"),
        "p99_added_ms": _added(stats, "p99"),
    }
    a, n = stats["auth"], stats["no_auth"]
    print(
        f"GET /api/v1/jobs/{{id}}, {result['requests_per_mode']} requests each, "
        f"{args.rounds} interleaved rounds:\n"
        f"  with a token   p50 {a['p50']:.3f} ms  p99 {a['p99']:.3f} ms\n"
        f"  no auth        p50 {n['p50']:.3f} ms  p99 {n['p99']:.3f} ms\n"
        f"  the check adds p50 {result['p50_added_ms']:+.3f} ms, "
        f"p99 {result['p99_added_ms']:+.3f} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("auth", help="latency of GET /api/v1/jobs/{id} with and without tokens")
    p.add_argument("--redis", default=None)
    p.add_argument("--requests", type=int, default=1000, help="per mode and round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)


def _added(stats: dict[str, dict[str, float | None]], pct: str) -> float | None:
    """What the token check adds at one percentile (None when a mode has no samples)."""
    with_auth, without = stats["auth"][pct], stats["no_auth"][pct]
    return None if with_auth is None or without is None else round(with_auth - without, 4)
