"""``shardsched bench faults --nemesis``: a Jepsen-style nemesis on a primary with two
replicas behind three sentinels, judged by what the jobs themselves saw.

Two nodes and two workers (``handler:bench-record``: every execution appends ``<run id>
<start ms> <pid>-<n>`` to its process's file) run interval jobs every second (their
offsets spread over the second) and every-minute cron jobs (the :00 burst), while a
seeded schedule (printed; the same seed replays it) mixes, one at a time: the primary
killed -9 or stopped (SIGSTOP) past the sentinels' judgement, a replica killed, the
primary cut off from its replicas and sentinels but not from the clients (the split
brain: bench/ha_net.py), a node or a worker killed -9 or stopped, a node restarted with
its clock 30 s ahead or behind. Then the nodes stop, the workers drain, and the checker
(:mod:`shardsched.bench.nemesis_check`) compares the ticks the schedules owe, worked out
here from the schedules alone, with the record and the audit.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis as redis_py

from shardsched.bench import ha_net
from shardsched.bench.fleet import FAKETIME_LIBS, Fleet
from shardsched.bench.ha_redis import HaRedis
from shardsched.bench.nemesis_check import Verdict, check
from shardsched.core.instants import from_ms
from shardsched.core.models import CronSchedule, IntervalSchedule, JobSpec
from shardsched.sdk import Client

KINDS = (
    "primary-kill-9", "primary-sigstop", "replica-kill-9", "primary-partition",
    "node-kill-9", "node-sigstop", "worker-kill-9", "worker-sigstop", "node-clock-jump",
)  # fmt: skip
#: how long each fault holds before it is undone
HOLD_S = {
    "primary-kill-9": 6.0, "primary-sigstop": 6.0, "replica-kill-9": 5.0,
    "primary-partition": 10.0, "node-kill-9": 3.0, "node-sigstop": 6.0,
    "worker-kill-9": 3.0, "worker-sigstop": 4.0, "node-clock-jump": 15.0,
    "primary-kill-at-00": 6.0,
}  # fmt: skip
#: Not in the default mix: the primary killed 2 s before a minute boundary, to measure what
#: a failover costs the :00 burst (``--kinds primary-kill-at-00``).
AT_BOUNDARY = "primary-kill-at-00"
NAMESPACE = "nemesis"
SHARDS = 16


@dataclass
class Event:
    at_s: float  #: from the start of the load
    kind: str
    target: str = ""  #: node-a / worker-b / +30s ...
    hold_s: float = 0.0
    began_ms: int = 0  #: wall clock, filled in as it runs
    ended_ms: int = 0
    note: str = ""


def schedule(seed: int, seconds: float, kinds: tuple[str, ...] = KINDS) -> list[Event]:
    """The faults of a run: one at a time, 10 to 25 s apart after each is undone."""
    rng = random.Random(seed)
    events, t = [], 15.0
    while t < seconds - 25:
        kind = rng.choice(kinds)
        target = ""
        if kind.startswith("node"):
            target = rng.choice(["node-a", "node-b"])
        elif kind.startswith("worker"):
            target = rng.choice(["worker-a", "worker-b"])
        if kind == "node-clock-jump":
            target += rng.choice([" +30s", " -30s"])
        events.append(Event(round(t, 1), kind, target, HOLD_S[kind]))
        t += HOLD_S[kind] + rng.uniform(10, 25)
    return events


@dataclass
class Nemesis:
    ha: HaRedis
    fleet: Fleet
    events: list[Event] = field(default_factory=list)

    def act(self, e: Event) -> None:
        e.began_ms = time.time_ns() // 1_000_000
        kind, target = e.kind, e.target.split(" ")[0]
        if kind.startswith("primary"):
            if kind == AT_BOUNDARY:  # until 2 s before the next minute
                sec, usec = self.ha.server(self.ha.primary()).time()
                now = int(sec) + int(usec) / 1e6
                self._hold(Event(0, "", hold_s=(58 - now % 60) % 60))
                e.began_ms = time.time_ns() // 1_000_000
            p = self.ha.primary()
            e.note = f"r{p}"
            if kind in ("primary-kill-9", AT_BOUNDARY):
                self.ha.kill(p)
                self._hold(e)
                self.ha.start_server(p, self._new_primary(p))
            elif kind == "primary-sigstop":
                self.ha.signal(p, signal.SIGSTOP)
                self._hold(e)
                self.ha.signal(p, signal.SIGCONT)
            else:
                self.ha.net.cut(p)
                self._hold(e)
                self.ha.net.heal(p)
            e.note += f" -> r{self.ha.primary()}"
        elif kind == "replica-kill-9":
            p = self.ha.primary()
            r = next(i for i in range(self.ha.net.servers) if i != p)
            e.note = f"r{r}"
            self.ha.kill(r)
            self._hold(e)
            self.ha.start_server(r, p)
        elif kind.endswith("kill-9"):
            self.fleet.kill(target)
            self._hold(e)
            self._start(target)
        elif kind.endswith("sigstop"):
            self.fleet.signal(target, signal.SIGSTOP)
            self._hold(e)
            self.fleet.signal(target, signal.SIGCONT)
        elif kind == "node-clock-jump":
            if not FAKETIME_LIBS:
                e.note = "skipped: no libfaketime"
                return
            offset = e.target.split(" ")[1]
            self.fleet.kill(target)
            self.fleet.node(target, env={"LD_PRELOAD": FAKETIME_LIBS[0], "FAKETIME": offset})
            self._hold(e)
            self.fleet.kill(target)
            self.fleet.node(target)
        e.ended_ms = time.time_ns() // 1_000_000
        self.fleet.wait_ready()

    def _hold(self, e: Event) -> None:
        deadline = time.monotonic() + e.hold_s
        while (left := deadline - time.monotonic()) > 0:
            self.fleet.check()
            time.sleep(min(left, 0.2))  # the fault holds this long: the point of the run

    def _new_primary(self, old: int, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while (p := self.ha.primary()) == old:
            if time.monotonic() > deadline:
                raise TimeoutError("no failover")
            time.sleep(0.1)  # the sentinels' election: polled
        return p

    def _start(self, name: str) -> None:
        (self.fleet.node if name.startswith("node") else self.fleet.worker)(name)


def run_nemesis(
    seed: int,
    seconds: float,
    durable: int = 0,
    interval_jobs: int = 500,
    minute_jobs: int = 25_000,
    kinds: tuple[str, ...] = KINDS,
    root: Path | None = None,
) -> Verdict:
    """One run (module docstring); raises RuntimeError without network namespaces."""
    if not ha_net.available():
        raise RuntimeError("the nemesis needs root and `ip netns` (network namespaces)")
    root = root or Path(tempfile.mkdtemp(prefix=f"shardsched-nemesis-{seed}-"))
    record = root / "record"
    record.mkdir(parents=True)
    events = schedule(seed, seconds, kinds)
    print(f"nemesis seed {seed}, {seconds:.0f} s, durable {durable}: "
          + "; ".join(f"{e.at_s:.0f}s {e.kind} {e.target}".strip() for e in events),
          flush=True)  # fmt: skip
    net = ha_net.HaNet()
    net.up()
    ha = HaRedis(root / "redis", net)
    fleet = Fleet("", NAMESPACE, root)
    try:
        ha.start()
        fleet.url = ha.url
        fleet.env = {"SHARDSCHED_BENCH_RECORD": str(record)}
        fleet.worker_args = ("--import", "shardsched.bench.record_handler")
        if durable:
            fleet.node_args = ("--durable-replicas", str(durable))
        primary = ha.server(ha.primary())
        primary.hset(f"{NAMESPACE}:{{g}}:meta", "shards", SHARDS)
        client = Client(ha.url, NAMESPACE)
        sec, usec = primary.time()
        start_ms = (int(sec) * 1000 + int(usec) // 1000) // 1000 * 1000 + 8000
        specs = [
            JobSpec(name=f"i{i}", command="handler:bench-record", lease_s=10,
                    schedule=IntervalSchedule(every_s=1.0, start_at=from_ms(
                        start_ms + i * 1000 // max(interval_jobs, 1))))
            for i in range(interval_jobs)
        ] + [
            JobSpec(name=f"m{i}", command="handler:bench-record", lease_s=10,
                    schedule=CronSchedule(expression="* * * * *"))
            for i in range(minute_jobs)
        ]  # fmt: skip
        created = client.add_jobs(specs)
        jobs = {c.job_id: s for c, s in zip(created, specs, strict=True)}
        created_ms = time.time_ns() // 1_000_000
        for name in ("node-a", "node-b"):
            fleet.node(name)
        for name in ("worker-a", "worker-b"):
            fleet.worker(name)
        fleet.wait_ready()
        nemesis = Nemesis(ha, fleet, events)
        began = time.monotonic()
        for e in events:
            nemesis._hold(Event(0, "", hold_s=e.at_s - (time.monotonic() - began)))
            print(f"  {time.monotonic() - began:6.1f}s {e.kind} {e.target}", flush=True)
            nemesis.act(e)
            print(f"         {e.note or 'done'}", flush=True)
        nemesis._hold(Event(0, "", hold_s=seconds - (time.monotonic() - began)))
        sec, usec = ha.server(ha.primary()).time()
        horizon_ms = int(sec) * 1000 + int(usec) // 1000 - 2000
        took = _caught_up(ha, horizon_ms)  # a fault near the end may still hold firing
        print(f"  every tick up to the end fired {took:.1f} s after it", flush=True)
        for name in ("node-a", "node-b"):  # no more firing; the workers drain what is due
            fleet.kill(name)
        return check(
            client, ha, fleet, record, jobs, events,
            window=(max(start_ms, created_ms + 2000), horizon_ms), seed=seed, durable=durable,
        )  # fmt: skip
    finally:  # each step even when the one before it is interrupted
        try:
            fleet.stop_all()
        finally:
            try:
                ha.stop_all()
            finally:
                net.down()


def _caught_up(ha: Any, horizon_ms: int, timeout: float = 180) -> float:
    """Until no shard's timer holds a tick at or before ``horizon_ms`` (every tick owed by
    then fired), read on whichever server is primary; the seconds that took. A fault
    near the end (a cut, in the durable mode: ~27 s with nothing acknowledged) would
    otherwise end the run while its ticks still wait, and count them never run."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        try:
            primary = ha.server(ha.primary(), timeout=5)
            due = sum(
                int(primary.zcount(f"{NAMESPACE}:{{{s}}}:timer", "-inf", horizon_ms))
                for s in range(SHARDS)
            )
        except (redis_py.RedisError, RuntimeError, OSError):
            due = -1  # a failover under way (no server or sentinel answers): asked again
        if due == 0:
            break
        time.sleep(0.5)  # the nodes firing what is owed: polled
    return time.monotonic() - began


def main(args: argparse.Namespace) -> list[Verdict]:
    kinds = tuple(args.kinds.split(",")) if args.kinds else KINDS
    verdicts = []
    for seed in args.seed or [1]:
        for durable in args.durable or [0]:
            v = run_nemesis(seed, args.seconds, durable, args.interval_jobs, args.minute_jobs,
                            kinds)  # fmt: skip
            print(v.table(), flush=True)
            verdicts.append(v)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(v) for v in verdicts], indent=2) + "\n")
    return verdicts


def add_arguments(p: Any) -> None:
    p.add_argument(
        "--nemesis",
        action="store_true",
        help="the HA nemesis on a primary, two replicas and three sentinels",
    )
    p.add_argument("--seed", type=int, action="append", help="nemesis: its schedule's seed")
    p.add_argument("--seconds", type=float, default=600.0, help="nemesis: how long (600)")
    p.add_argument("--durable", type=int, action="append",
                   help="nemesis: 0 (off) or N replicas; repeat for both")  # fmt: skip
    p.add_argument("--interval-jobs", type=int, default=500)
    p.add_argument("--minute-jobs", type=int, default=25_000)
    p.add_argument("--kinds", default=None, help=f"nemesis: a comma list of {', '.join(KINDS)}")


__all__ = ["KINDS", "Event", "add_arguments", "main", "run_nemesis", "schedule"]
