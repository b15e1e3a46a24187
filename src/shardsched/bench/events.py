"""``shardsched bench events``: triggers beyond the clock through real faults, judged by
what the jobs themselves recorded.

Two nodes (with the HTTP API), two workers and a redis-server of its own (AOF
``always``). A chain of three jobs (``extract`` every second, ``transform`` after its
success, ``load`` after transform's) and a job fed by a signed hook. First a clean phase
measures the hook endpoint (events a second, acknowledgement p50/p99); then senders post
``--events`` signed events, ``--dups`` of them sent twice (the same delivery key, as a
sender retrying would), while a node is killed -9, a worker is killed -9 and Redis is
killed -9 and restarted, each brought back. A sender retries a request that failed or
was answered 5xx, signed anew, under the same key.

Judged from the jobs' own record (each run appends its run id, bench/record_handler.py)
and the events' records: every event received ends in exactly one outcome; each
delivery key acknowledged has exactly one run (none lost, none doubled), and that run
executed; each link of the chain ran exactly once per upstream success; the audit is
clean (no event unsettled, no tick missing or doubled).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis as redis_py

from shardsched.bench.fleet import Fleet, Scene, read_record
from shardsched.bench.harness import BenchRedis, percentiles
from shardsched.core.events import OnRule, When
from shardsched.core.hooks import HookSpec
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops.history import audit
from shardsched.runtime.redis_server import free_port
from shardsched.sdk import Client

SECRET = "bench-events-secret-0123456789"
NS = "bench-events"
HANDLER = "handler:bench-record"


@dataclass
class Sent:
    """What the senders saw: per delivery key, the events acknowledged (id, outcome) and
    the time from a key's first send to its acknowledgement."""

    acked: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    ack_s: list[float] = field(default_factory=list)
    retries: int = 0
    gave_up: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def signed(body: bytes, key: str) -> dict[str, str]:
    t = int(time.time())
    mac = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return {"Shardsched-Signature": f"t={t},v1={mac}", "X-Delivery": key,
            "content-type": "application/json"}  # fmt: skip


def send_all(
    urls: list[str],
    keys: list[str],
    senders: int,
    sent: Sent,
    gates: list[tuple[int, threading.Event]] = (),  # type: ignore[assignment]
) -> float:
    """Post one signed event per key (in order, spread over ``senders`` threads), each
    retried until acknowledged (two minutes at most); returns the seconds it took.
    ``gates``: (n, event): the n-th key and later wait for the event (a fault begun), so
    every fault lands while events are still being sent."""
    todo = list(enumerate(keys))
    lock = threading.Lock()

    def worker(n: int) -> None:
        with httpx.Client(timeout=10) as http:
            while True:
                with lock:
                    if not todo:
                        return
                    i, key = todo.pop(0)
                for at, begun in gates:
                    if i >= at:
                        begun.wait()
                body = json.dumps({"k": key, "i": i}).encode()
                began = time.monotonic()
                deadline = began + 120
                url = urls[(i + n) % len(urls)]
                while True:
                    try:
                        reply = http.post(url, content=body, headers=signed(body, key))
                        if reply.status_code == 200:
                            answer = reply.json()
                            with sent.lock:
                                sent.acked.setdefault(key, []).append(
                                    (answer["event_id"], answer["outcome"])
                                )
                                sent.ack_s.append(time.monotonic() - began)
                            break
                        if reply.status_code < 500:
                            raise RuntimeError(f"refused: {reply.status_code} {reply.text}")
                    except httpx.HTTPError:
                        pass
                    with sent.lock:
                        sent.retries += 1
                    if time.monotonic() > deadline:
                        with sent.lock:
                            sent.gave_up.append(key)
                        break
                    url = urls[(urls.index(url) + 1) % len(urls)]  # the other node
                    time.sleep(0.2)  # a sender's backoff before it sends again

    began = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - began


def run_bench(events: int, dups: float, senders: int, seed: int, faults: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="shardsched-bench-events-"))
    record = root / "record"
    record.mkdir()
    server = BenchRedis("always")
    server.start()
    r = redis_py.Redis(port=server.port)
    r.hset(f"{NS}:{{g}}:meta", "shards", 16)
    fleet = Fleet(
        server.url,
        NS,
        root,
        worker_args=("--import", "shardsched.bench.record_handler"),
        env={"SHARDSCHED_BENCH_RECORD": str(record)},
    )
    ports = {"node-a": free_port(), "node-b": free_port()}
    client = Client(server.url, NS)
    result: dict[str, Any] = {"events": events, "dups": dups, "seed": seed, "faults": faults}
    try:
        client._run(_put_hook(client))
        every = IntervalSchedule(every_s=1.0)
        client.put_job("extract", JobSpec(name="extract", command=HANDLER, schedule=every))
        after = [OnRule(after="job:extract")]
        client.put_job("transform", JobSpec(name="transform", command=HANDLER, on=after))
        after = [OnRule(after="job:transform", when=When.SUCCEEDED)]
        client.put_job("load", JobSpec(name="load", command=HANDLER, on=after))
        fed = [OnRule(event="hook.feed")]
        client.put_job("fed", JobSpec(name="fed", command=HANDLER, on=fed))
        for name, port in ports.items():
            _node(fleet, name, port)
        for name in ("worker-a", "worker-b"):
            fleet.worker(name)
        fleet.wait_ready()
        urls = [f"http://127.0.0.1:{p}/api/v1/hooks/feed" for p in ports.values()]
        scene = Scene(server, fleet, r)

        clean = Sent()
        warm = [f"warm-{i}" for i in range(max(200, events // 5))]
        took = send_all(urls, warm, senders, clean)
        lat = percentiles(clean.ack_s)
        result["clean"] = {
            "events": len(warm), "seconds": round(took, 2),
            "events_per_s": round(len(warm) / took, 1),
            "ack_ms": {k: None if v is None else round(v * 1000, 1) for k, v in lat.items()},
        }  # fmt: skip
        print(f"clean: {result['clean']}", file=sys.stderr, flush=True)

        keys = [f"key-{i}" for i in range(events)]
        twice = rng.sample(keys, round(events * dups))
        order = keys + twice
        rng.shuffle(order)
        sent = Sent()
        done = threading.Event()
        timeline: list[tuple[float, str]] = []
        plan = [(0.2, "node"), (0.45, "worker"), (0.7, "redis")] if faults else []
        gates = [(round(share * len(order)), threading.Event()) for share, _ in plan]

        def inject() -> None:
            began = time.monotonic()
            for (share, what), (_at, begun) in zip(plan, gates, strict=True):
                while len(sent.ack_s) < share * len(order) * 0.9 and not done.is_set():
                    time.sleep(0.05)  # polls the senders' progress
                timeline.append((round(time.monotonic() - began, 2), what))
                begun.set()
                if what == "node":
                    fleet.kill("node-a")
                    scene.wait(2)
                    _node(fleet, "node-a", ports["node-a"])
                elif what == "worker":
                    fleet.kill("worker-a")
                    scene.wait(2)
                    fleet.worker("worker-a")
                else:
                    server.kill()
                    scene.wait(1.5)
                    server.restart()

        injector = threading.Thread(target=inject)
        if faults:
            injector.start()
        took = send_all(urls, order, senders, sent, gates)
        done.set()
        if faults:
            injector.join()
        fleet.wait_ready()
        result["faulted"] = {"sends": len(order), "seconds": round(took, 2),
                             "retries": sent.retries, "gave_up": len(sent.gave_up),
                             "faults_at_s": timeline}  # fmt: skip
        print(f"faulted: {result['faulted']}", file=sys.stderr, flush=True)
        scene.wait(3)  # two more extract ticks, then the chain stops
        _retry(lambda: client.pause("extract", reason="bench over"))
        _quiet(client, r, scene)
        fleet.stop_all()
        result.update(_judge(client, r, record, {**clean.acked, **sent.acked}, sent))
        result["exits"] = dict(fleet.exits)
    finally:
        fleet.stop_all()
        client.close()
        r.close()
        server.stop()
    result["ok"] = _ok(result)
    return result


def _put_hook(client: Client) -> Any:
    from shardsched.ops.events import hooks

    spec = HookSpec(secrets=[SECRET], idempotency_header="X-Delivery")
    return hooks.put_hook(client.deployment, "feed", spec)


def _node(fleet: Fleet, name: str, port: int) -> None:
    fleet.node(name, http=f"127.0.0.1:{port}")


def _retry(fn: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # Redis restarting: try again


def _quiet(client: Client, r: Any, scene: Scene, timeout: float = 120) -> None:
    """Until every event is settled, every stream and outcome list drained and no run
    pending: the chain's last links may still be owed when the senders stop."""
    dep = client.deployment
    deadline = time.monotonic() + timeout
    still = 0
    while time.monotonic() < deadline:
        scene.fleet.check()
        pipe = r.pipeline(transaction=False)
        for s in range(dep.n_shards):
            sk = dep.shard(s)
            pipe.xlen(sk.ready)
            pipe.zcard(sk.events_pending)
            pipe.llen(sk.outcomes)
        busy = sum(pipe.execute())
        report = client._run(audit.audit(dep, settle_s=0.0))
        running = sum(n for k, n in report.executions.items() if k not in ("terminal",))
        still = still + 1 if busy == 0 and report.pending == 0 and running == 0 else 0
        if still >= 8:  # two seconds quiet: the owners' rounds have nothing left
            return
        time.sleep(0.25)  # polls until quiet
    raise TimeoutError("the deployment did not settle")


def _runs(client: Client, job_id: str) -> list[Any]:
    out, cursor = [], None
    while True:
        page = client.list_runs(job_id, limit=1000, cursor=cursor)
        out += page.runs
        cursor = page.next_cursor
        if not cursor:
            return out


def _judge(
    client: Client, r: Any, record: Path, acked: dict[str, list[tuple[str, str]]], sent: Sent
) -> dict[str, Any]:
    executions, _starts = read_record(record)
    dep = client.deployment
    # events: every acknowledged one has exactly one outcome recorded
    ids = [event_id for pairs in acked.values() for event_id, _ in pairs]
    pipe = r.pipeline(transaction=False)
    for event_id in ids:
        pipe.hget(dep.keys_for(event_id).event(event_id), "o")
    outcomes = Counter(json.loads(o)["outcome"] if o else "none" for o in pipe.execute())
    # the fed job: one run per key acknowledged, each executed
    runs_by_key: dict[str, set[str]] = {}
    fed_runs = _runs(client, "fed")
    for run in fed_runs:
        key = (run.args or {}).get("k", "?")
        runs_by_key.setdefault(key, set()).add(run.run_id)
    lost_keys = [k for k in acked if not runs_by_key.get(k)]
    doubled_keys = [k for k, rids in runs_by_key.items() if len(rids) > 1]
    never_ran = [run.run_id for run in fed_runs if executions[run.run_id] == 0]
    # the chain: each link once per upstream success
    links = {}
    for up, down in (("extract", "transform"), ("transform", "load")):
        ok = {run.run_id for run in _runs(client, up) if run.state == "succeeded"}
        causes = Counter((run.cause or "").removeprefix("after:") for run in _runs(client, down))
        links[f"{up}->{down}"] = {
            "upstream_successes": len(ok),
            "missing": len(ok - set(causes)),
            "doubled": sum(1 for c, n in causes.items() if n > 1),
            "unexpected": len(set(causes) - ok),
            "not_executed": sum(1 for run in _runs(client, down) if executions[run.run_id] == 0),
        }
    report = client._run(audit.audit(dep, settle_s=0.0))
    return {
        "event_outcomes": dict(outcomes),
        "keys_acked": len(acked),
        "keys_gave_up": len(sent.gave_up),
        "fed_runs": len(fed_runs),
        "lost": len(lost_keys),
        "doubled": len(doubled_keys),
        "never_executed": len(never_ran),
        "executed_more_than_once": sum(1 for r in fed_runs if executions[r.run_id] > 1),
        "chain": links,
        "audit": {"missing": report.missing, "duplicated": report.duplicated,
                  "stranded": report.stranded, "events": report.events, "ok": report.ok},
    }  # fmt: skip


def _ok(r: dict[str, Any]) -> bool:
    links_ok = all(
        v["missing"] == 0 and v["doubled"] == 0 and v["unexpected"] == 0
        and v["not_executed"] == 0 and v["upstream_successes"] > 0
        for v in r.get("chain", {}).values()
    )  # fmt: skip
    return bool(
        r.get("lost") == 0
        and r.get("doubled") == 0
        and r.get("never_executed") == 0
        and r.get("keys_gave_up") == 0
        and r.get("event_outcomes", {}).get("none", 0) == 0
        and links_ok
        and r.get("audit", {}).get("ok")
        and not r.get("exits")
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    result = run_bench(args.events, args.dups, args.senders, args.seed, not args.no_faults)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    if not result["ok"]:
        raise SystemExit(1)
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("events", help="signed hook events and a chain of jobs through faults")
    p.add_argument("--events", type=int, default=10_000, help="distinct events sent")
    p.add_argument("--dups", type=float, default=0.05, help="share of them sent twice")
    p.add_argument("--senders", type=int, default=16, help="concurrent senders")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-faults", action="store_true", help="only send, no fault injected")
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
