"""``shardsched bench faults``: real processes through real faults, judged twice.

Each scenario starts a redis-server of its own (AOF ``always``), registers interval jobs
whose command appends its run id to a file of the job's own (the *independent record*:
written by the jobs, not by shardsched), starts node and worker processes, lets the load
run, injects one fault, lets it run on, then pauses every job, waits for the in-flight
runs to end and stops everything. It reports:

- from the audit (the ledger): expected ticks, fired once, skipped, missing, duplicated,
  and the max trigger lag;
- from the jobs' own record: runs fired but never executed (*lost*), and runs executed
  more than once (at-least-once allows it only after a lapsed lease; a run whose
  completion was applied must never run again, so ``re-executed after completion`` counts
  executions that started after the run's recorded finish);
- process exits: every node and worker must still be running when the scenario ends.

Sizes are small by default so that the same code is the CI fault suite
(``tests/system/test_fault_campaign.py``) and, with ``--jobs``/``--seconds``, the command.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import redis as redis_py

from shardsched.bench.fleet import (
    FAKETIME_LIBS,
    LEASE_TTL_S,
    Fleet,
    FreezableProxy,
    Scene,
    lost_and_after,
    read_record,
)
from shardsched.bench.harness import BenchRedis
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops.history import audit
from shardsched.sdk import Client


def _kill_owner_3x(s: Scene) -> None:
    for i in range(3):
        s.fleet.kill("node-a" if i % 2 == 0 else "node-b")
        s.wait(3)
        s.fleet.node("node-a" if i % 2 == 0 else "node-b")
        s.wait(3)


def _redis_kill_restart(s: Scene) -> None:
    s.server.kill()
    s.wait(1.5)
    s.server.restart()


def _redis_sigstop(s: Scene) -> None:
    assert s.server.proc is not None
    s.server.proc.send_signal(signal.SIGSTOP)
    time.sleep(8)
    s.server.proc.send_signal(signal.SIGCONT)


def _owner_sigstop(s: Scene) -> None:
    s.fleet.signal("node-a", signal.SIGSTOP)
    time.sleep(LEASE_TTL_S * 3 + 2)  # well past its leases: node-b takes over
    s.fleet.signal("node-a", signal.SIGCONT)


def fill_redis(r: Any, headroom: int = 4 << 20) -> None:
    """Set maxmemory just above what is used and fill it up until Redis answers OOM; then
    keep it there (maxmemory a little under the filled size, so small writes fail too)."""
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", used + headroom)
    chunk = b"x" * (64 << 10)
    for i in range(10_000):
        try:
            r.set(f"filler:{i}", chunk)
        except redis_py.exceptions.ResponseError as exc:
            oom = isinstance(exc, redis_py.exceptions.OutOfMemoryError)
            if not (oom or str(exc).startswith("OOM")):
                raise
            used = int(r.info("memory")["used_memory"])
            r.config_set("maxmemory", used - (256 << 10))
            return
    raise RuntimeError("Redis never reported OOM")


def free_redis(r: Any) -> None:
    keys = list(r.scan_iter("filler:*", count=1000))
    if keys:
        r.delete(*keys)
    r.config_set("maxmemory", 0)


def _redis_oom_15s(s: Scene) -> None:
    fill_redis(s.r)
    s.wait(15)
    free_redis(s.r)


def _node_cut_10s(s: Scene) -> None:
    """node-a reaches Redis only through a proxy; the proxy stops carrying bytes for 10 s."""
    proxy = FreezableProxy(s.server.port)
    try:
        s.fleet.kill("node-a")
        s.fleet.node("node-a", url=f"redis://127.0.0.1:{proxy.port}/0")
        s.wait(4)
        proxy.frozen.set()
        s.wait(10)
        proxy.frozen.clear()
        s.wait(4)
    finally:
        s.fleet.kill("node-a")  # before the proxy goes: its sockets would reset
        proxy.close()
        s.fleet.node("node-a")


def _node_clock_30s_ahead(s: Scene) -> None:
    """node-b restarted with its clock 30 s ahead (libfaketime): the Redis server's clock
    is the one clock, so nothing fires early and nothing is lost."""
    if not FAKETIME_LIBS:
        raise RuntimeError("libfaketime missing: apt-get install faketime")
    s.fleet.kill("node-b")
    s.fleet.node("node-b", env={"LD_PRELOAD": FAKETIME_LIBS[0], "FAKETIME": "+30s"})
    s.wait(3)
    s.fleet.kill("node-a")  # node-b (30 s ahead) owns everything for a while
    s.wait(8)
    s.fleet.node("node-a")


def _worker_kill(s: Scene) -> None:
    s.fleet.kill("worker-a")
    s.wait(2)
    s.fleet.worker("worker-a")


def _rolling_restart(s: Scene) -> None:
    """A rolling deploy: SIGTERM each node, then each worker, in turn, each started again
    as soon as it exits and the next one a second after it is ready."""
    for name in ("node-a", "node-b", "worker-a", "worker-b"):
        s.fleet.restart(name)
        s.fleet.wait_ready()
        s.wait(1)


def _all_nodes_restart(s: Scene) -> None:
    """Every node SIGTERMed at once, each started again as soon as it exits."""
    s.fleet.restart("node-a", "node-b")


SCENARIOS: dict[str, Callable[[Scene], None]] = {
    "owner-kill-9-x3": _kill_owner_3x,
    "redis-kill-9-restart": _redis_kill_restart,
    "redis-sigstop-8s": _redis_sigstop,
    "owner-sigstop-past-lease": _owner_sigstop,
    "redis-oom-15s": _redis_oom_15s,
    "worker-kill-9": _worker_kill,
    "node-cut-from-redis-10s": _node_cut_10s,
    "node-clock-30s-ahead": _node_clock_30s_ahead,
    "rolling-restart": _rolling_restart,
    "all-nodes-restart": _all_nodes_restart,
}


@dataclass
class Verdict:
    scenario: str
    expected: int
    fired_once: int
    skipped: int
    missing: int
    duplicated: int
    max_lag_s: float | None
    stranded: int  #: fired runs the audit finds running nowhere (past 60 s)
    lost: int  #: fired runs the jobs' own record never saw executed
    executed_twice: int  #: runs executed more than once (allowed only after a lapsed lease)
    lease_reclaims: int  #: runs the owners took back after their lease lapsed
    reexecuted_after_completion: int  #: executions started after the run's completion
    exits: dict[str, int]

    @property
    def ok(self) -> bool:
        return not (
            self.missing
            or self.duplicated
            or self.stranded
            or self.lost
            or self.reexecuted_after_completion
            or self.exits
        )


def run_scenario(
    name: str, jobs: int = 50, every_s: float = 1.0, before_s: float = 4.0, after_s: float = 6.0
) -> Verdict:
    fault = SCENARIOS[name]
    root = Path(tempfile.mkdtemp(prefix=f"shardsched-fault-{name}-"))
    record = root / "record"
    record.mkdir()
    server = BenchRedis("always")
    server.start()
    r = redis_py.Redis(port=server.port)
    ns = "faults"
    fleet = Fleet(server.url, ns, root)
    r.hset(f"{ns}:{{g}}:meta", "shards", 16)  # before the SDK opens the deployment
    client = Client(server.url, ns)
    try:
        now = from_ms(_server_ms(r))
        # each run appends "<run id> <start ms>" to its job's file; the start is the job's
        # own clock (same box): compared with the ledger's finish times below
        command = (
            f'echo "$SHARDSCHED_RUN_ID $(date +%s%3N)" >> {record}/$SHARDSCHED_JOB_ID; sleep 0.2'
        )
        specs = [
            JobSpec(
                name=f"f{i}",
                schedule=IntervalSchedule(every_s=every_s, start_at=now + timedelta(seconds=1)),
                command=command,
                timeout_s=30,
                lease_s=3,
            )
            for i in range(jobs)
        ]
        job_ids = [c.job_id for c in client.add_jobs(specs)]
        for n in ("node-a", "node-b"):
            fleet.node(n)
        for w in ("worker-a", "worker-b"):
            fleet.worker(w)
        scene = Scene(server, fleet, r)
        fleet.wait_ready()
        scene.wait(before_s)
        fault(scene)
        fleet.wait_ready()
        scene.wait(after_s)
        for job_id in job_ids:
            _retrying(partial(client.pause, job_id, reason="scenario over"))
        _settle(client, scene, timeout=60)
        fleet.stop_all()
        report = client._run(audit.audit(client.deployment, settle_s=0.0, stranded_after_s=60))
        runs = _finished_runs(client, job_ids)
        reclaims = _lease_reclaims(scene.r, client.deployment.n_shards, client)
    finally:
        fleet.stop_all()
        client.close()
        r.close()
        server.stop()
    executions, starts = read_record(record)
    lost, after = lost_and_after(runs, executions, starts)
    return Verdict(
        scenario=name,
        expected=report.expected,
        fired_once=report.fired,
        skipped=report.skipped,
        missing=report.missing,
        duplicated=report.duplicated,
        max_lag_s=report.lag_s.max,
        stranded=report.stranded,
        lost=lost,
        executed_twice=sum(1 for n in executions.values() if n > 1),
        lease_reclaims=reclaims,
        reexecuted_after_completion=after,
        exits=dict(fleet.exits),
    )


def _lease_reclaims(r: Any, n_shards: int, client: Client) -> int:
    pipe = r.pipeline(transaction=False)
    for s in range(n_shards):
        pipe.hget(client.deployment.shard(s).stats, "lease_reclaims")
    return sum(int(v or 0) for v in pipe.execute())


def _server_ms(r: Any) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def _retrying(fn: Callable[[], Any], timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _settle(client: Client, scene: Scene, timeout: float) -> None:
    """Until no run is still owed (pending in the audit) and the streams are drained."""
    deadline = time.monotonic() + timeout
    dep = client.deployment
    while time.monotonic() < deadline:
        scene.fleet.check()
        pipe = scene.r.pipeline(transaction=False)
        for s in range(dep.n_shards):
            pipe.xlen(dep.shard(s).ready)
        if sum(pipe.execute()) == 0:
            report = client._run(audit.audit(dep, settle_s=0.0))
            if report.pending == 0:
                return
        time.sleep(0.25)


def _finished_runs(client: Client, job_ids: list[str]) -> dict[str, int | None]:
    """Every fired run of the jobs: run id -> its finish time (ms), None if not finished."""
    out: dict[str, int | None] = {}
    for job_id in job_ids:
        cursor = None
        while True:
            page = client.list_runs(job_id, limit=1000, cursor=cursor)
            for run in page.runs:
                if run.finished_at is not None:
                    out[run.run_id] = int(run.finished_at.timestamp() * 1000)
                else:
                    out[run.run_id] = None
            cursor = page.next_cursor
            if not cursor:
                break
    return out


def format_table(verdicts: list[Verdict]) -> str:
    head = (
        f"{'scenario':<26} {'expected':>8} {'once':>6} {'skip':>5} {'miss':>5} {'dup':>4} "
        f"{'max lag':>8} {'strand':>6} {'lost':>5} {'x2':>4} {'recl':>5} {'after':>5}  exits"
    )
    rows = [head]
    for v in verdicts:
        lag = "-" if v.max_lag_s is None else f"{v.max_lag_s:.2f}s"
        rows.append(
            f"{v.scenario:<26} {v.expected:>8} {v.fired_once:>6} {v.skipped:>5} {v.missing:>5} "
            f"{v.duplicated:>4} {lag:>8} {v.stranded:>6} {v.lost:>5} {v.executed_twice:>4} "
            f"{v.lease_reclaims:>5} {v.reexecuted_after_completion:>5}  {v.exits or 'none'}"
        )
    return "\n".join(rows)


def run(args: argparse.Namespace) -> list[Any]:
    if args.nemesis:
        from shardsched.bench import nemesis

        found = nemesis.main(args)
        if not all(v.ok for v in found):
            raise SystemExit(1)
        return found
    names = args.scenario or list(SCENARIOS)
    verdicts = []
    for name in names:
        print(f"scenario {name} …", file=sys.stderr, flush=True)
        verdicts.append(run_scenario(name, jobs=args.jobs, every_s=args.every))
    print(format_table(verdicts))
    if args.json:
        Path(args.json).write_text(
            json.dumps([{**v.__dict__, "ok": v.ok} for v in verdicts], indent=2) + "\n"
        )
    if not all(v.ok for v in verdicts):
        raise SystemExit(1)
    return verdicts


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("faults", help="fault campaign with real processes, audited twice")
    p.add_argument("--scenario", action="append", choices=list(SCENARIOS))
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--every", type=float, default=1.0, help="interval of every job (s)")
    p.add_argument("--json", default=None, metavar="FILE")
    from shardsched.bench.nemesis import add_arguments

    add_arguments(p)
    p.set_defaults(bench=run)
