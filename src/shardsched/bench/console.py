"""``shardsched bench console``: how long the API takes to answer what the console's
screens ask for, with many jobs registered (the console renders in the browser from these
answers, so their time is its server-side render time).

It registers ``--jobs`` daily jobs (nothing fires while it measures; one in a hundred is
labelled and one in a thousand paused), starts a node with its HTTP API on loopback, and
times each screen's calls ``--repeat`` times: the jobs page (50 jobs with their last 12
runs), a search by name, a selective filter (paused jobs), a job's page (the job, its runs,
its ticks of a day, its next fires), the overview (status, cluster) and the fleet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from shardsched.bench.harness import Procs, bench_redis, start_ready
from shardsched.core.models import CronSchedule, JobSpec
from shardsched.runtime.redis_server import free_port
from shardsched.sdk import Client


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=60) as resp:  # loopback only
        return json.loads(resp.read())


def _post(base: str, path: str, body: dict | None) -> Any:
    req = urllib.request.Request(
        base + path, json.dumps(body or {}).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _timed(calls: list[tuple[str, str, dict | None]], base: str) -> float:
    """One screen's calls made at once (as the page makes them); its time in ms."""
    start = time.perf_counter()
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [
            pool.submit(_get, base, path)
            if method == "GET"
            else pool.submit(_post, base, path, body)
            for method, path, body in calls
        ]
        for f in futures:
            f.result()
    return (time.perf_counter() - start) * 1000


def run(args: argparse.Namespace) -> dict:
    result: dict[str, Any] = {"jobs": args.jobs, "repeat": args.repeat, "screens_ms": {}}
    with bench_redis(args.redis, "off") as url, Procs() as procs:
        ns = f"console{int(time.time()) % 10**6}"
        client = Client(url, ns)
        specs = [
            JobSpec(
                name=f"job-{n:07d}",
                schedule=CronSchedule(expression=f"{n % 60} 3 * * *"),
                command="true",
                labels={"team": "payments"} if n % 100 == 0 else {},
            )
            for n in range(args.jobs)
        ]
        start = time.perf_counter()
        created = client.add_jobs(specs, batch=2000)
        print(f"console: registered {args.jobs} jobs in {time.perf_counter() - start:.1f} s")
        for c in created[::1000]:
            client.pause(c.job_id, reason="bench")
        one = created[len(created) // 2].job_id
        client.close()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        start_ready(
            procs, "node", "node", "--redis", url, "--namespace", ns, "--node-id", "console-node",
            "--http", f"127.0.0.1:{port}", "--insecure-no-auth",
        )  # fmt: skip
        job = _get(base, f"/api/v1/jobs/{one}")
        day = time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(time.time() - 86400))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        screens: dict[str, list[tuple[str, str, dict | None]]] = {
            "jobs page (50, last 12 runs each)": [("GET", "/api/v1/jobs?limit=50&recent=12", None)],
            "search by name": [("GET", "/api/v1/jobs?limit=50&recent=12&name_prefix=job-04", None)],
            "filter: paused": [("GET", "/api/v1/jobs?limit=50&recent=12&status=paused", None)],
            "filter: label": [("GET", "/api/v1/jobs?limit=50&recent=12&label=team:payments", None)],
            "job page": [
                ("GET", f"/api/v1/jobs/{one}", None),
                ("GET", f"/api/v1/jobs/{one}/runs?limit=20", None),
                ("GET", f"/api/v1/jobs/{one}/versions", None),
                ("GET", f"/api/v1/jobs/{one}/ticks?since={day}&until={now}&limit=500", None),
                ("POST", "/api/v1/schedules/preview", {"schedule": job["schedule"], "count": 10}),
            ],
            "overview": [("GET", "/api/v1/status", None), ("GET", "/api/v1/cluster", None)],
            "fleet": [("GET", "/api/v1/workers", None), ("GET", "/api/v1/cluster", None)],
        }
        for name, calls in screens.items():
            _timed(calls, base)  # warm
            times = sorted(_timed(calls, base) for _ in range(args.repeat))
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            result["screens_ms"][name] = {
                "median": round(statistics.median(times), 1),
                "p95": round(p95, 1),
            }
            print(f"  {name:38s} median {statistics.median(times):7.1f} ms   p95 {p95:7.1f} ms")
        result["jobs_page_found"] = len(_get(base, "/api/v1/jobs?limit=50&recent=12")["jobs"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("console", help="the API answers the console's screens need, timed")
    p.add_argument("--redis", default=None)
    p.add_argument("--jobs", type=int, default=500_000)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
