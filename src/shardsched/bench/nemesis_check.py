"""The nemesis's checker: what the schedules owe, worked out from the schedules alone
(whole seconds from an interval job's start, every minute boundary for a cron ``* * * *
*``: no scheduling code), against what the jobs wrote themselves (``<run id> <start ms>
<pid>-<n>`` per execution) and against the audit.

It reports ticks never run, ticks run under more than one run id, runs executed more
than once (by execution id) split by cause: after a worker of theirs was killed or
stopped (at-least-once: its lease lapsed, allowed) or not (a claim or completion the
failover lost), runs still stuck at the end, the trigger lag (first execution minus tick)
and, for each fault of the primary, the longest time in which nothing executed.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardsched.core.ids import parse_run_id
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops.history import audit
from shardsched.sdk import Client

_LAPSE_S = 12.0  #: a worker fault explains a second execution this long after it (lease 10 s)


@dataclass
class Verdict:
    seed: int
    durable: int
    seconds: float
    events: list[dict[str, Any]]
    expected: int
    never_run: int
    doubled_triggers: int  #: ticks executed under more than one run id
    second_executions: int  #: runs executed more than once
    after_worker_fault: int  #: of those, explained by a worker killed or stopped
    by_failover: int  #: of those, not: lost by Redis
    unexpected: int  #: executions of ticks no schedule owes in the window
    stuck: int  #: fired runs still running, queued or stranded at the end
    lag_s: dict[str, float]
    boundary_lag_s: list[float]  #: the :00 burst's max lag, minute by minute
    outages_s: list[dict[str, Any]]  #: per primary fault, the longest time nothing ran
    audit: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (
            self.never_run
            or self.doubled_triggers
            or self.unexpected
            or self.stuck
            or self.audit.get("missing")
            or self.audit.get("duplicated")
        )

    def table(self) -> str:
        rows = [
            f"seed {self.seed}, durable {self.durable}, {self.seconds:.0f} s, "
            f"{len(self.events)} faults",
            f"  ticks owed {self.expected}: never run {self.never_run}, run under two run ids "
            f"{self.doubled_triggers}, unexpected {self.unexpected}, stuck {self.stuck}",
            f"  executed twice {self.second_executions}: after a worker fault "
            f"{self.after_worker_fault}, by the failover {self.by_failover}",
            f"  lag p50 {self.lag_s.get('p50', 0):.3f} s p99 {self.lag_s.get('p99', 0):.3f} s "
            f"max {self.lag_s.get('max', 0):.3f} s; :00 max "
            + ", ".join(f"{x:.2f}" for x in self.boundary_lag_s),
            "  primary faults: "
            + (
                "; ".join(f"{o['kind']} nothing ran {o['gap_s']:.2f} s" for o in self.outages_s)
                or "none"
            ),
            f"  audit: {self.audit}",
        ]
        return "\n".join(rows)


def read_executions(record: Path) -> list[tuple[str, int, str]]:
    """(run id, start ms, execution id) of every execution the jobs recorded."""
    out = []
    for path in record.iterdir():
        for line in path.read_text().splitlines():
            parts = line.split(" ")
            if len(parts) == 3:
                out.append((parts[0], int(parts[1]), parts[2]))
    return out


def owed(spec: JobSpec, lo: int, hi: int) -> list[int]:
    """The ticks in [lo, hi] (ms) the job's schedule owes: an interval's whole periods
    from its start, or (any other: the cron ``* * * * *``) each minute boundary."""
    sched = spec.schedule
    if isinstance(sched, IntervalSchedule):
        assert sched.start_at is not None
        first = int(sched.start_at.timestamp() * 1000)
        step = int(sched.every_s * 1000)
        k = max(0, -(-(lo - first) // step))
        return list(range(first + k * step, hi + 1, step))
    return list(range(-(-lo // 60_000) * 60_000, hi + 1, 60_000))


def _drain(client: Client, timeout: float = 180) -> Any:
    """Until no run the audit judges is still owed or in flight (the nodes are gone: only
    the workers' queues drain); the audit then."""
    deadline = time.monotonic() + timeout
    while True:
        report = client._run(audit.audit(client.deployment, settle_s=0.0, stranded_after_s=60))
        busy = sum(v for k, v in report.executions.items() if k in ("running", "queued"))
        if busy == 0 or time.monotonic() > deadline:
            return report
        time.sleep(1.0)  # the workers' queues draining: polled


def check(
    client: Client,
    ha: Any,
    fleet: Any,
    record: Path,
    jobs: dict[str, JobSpec],
    events: list[Any],
    window: tuple[int, int],
    seed: int,
    durable: int,
) -> Verdict:
    lo, hi = window
    _drain(client)
    sec, usec = ha.server(ha.primary()).time()
    now_ms = int(sec) * 1000 + int(usec) // 1000
    report = client._run(
        audit.audit(client.deployment, settle_s=max(0.0, (now_ms - hi) / 1000), stranded_after_s=60)
    )
    executions = read_executions(record)
    by_tick: dict[tuple[str, int], set[str]] = defaultdict(set)
    by_run: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for rid, start, exec_id in executions:
        job, tick_text, _attempt = parse_run_id(rid)
        if tick_text.isdigit() and lo <= int(tick_text) <= hi:
            by_tick[(job, int(tick_text))].add(rid)
            by_run[rid].append((start, exec_id))
    expected = {(job, t) for job, spec in jobs.items() for t in owed(spec, lo, hi)}
    worker_faults = [
        (e.began_ms - 1000, e.ended_ms + _LAPSE_S * 1000)
        for e in events
        if e.kind.startswith("worker")
    ]
    twice = {rid: sorted(ex) for rid, ex in by_run.items() if len({x for _, x in ex}) > 1}
    explained = sum(1 for ex in twice.values() if any(a <= ex[0][0] <= b for a, b in worker_faults))
    lags = sorted(
        (min(s for rid in rids for s, _ in by_run[rid]) - tick) / 1000
        for (job, tick), rids in by_tick.items()
        if (job, tick) in expected
    )
    minute: dict[int, float] = defaultdict(float)
    for (job, tick), rids in by_tick.items():
        if (
            tick % 60_000 == 0
            and jobs.get(job)
            and not isinstance(jobs[job].schedule, IntervalSchedule)
        ):
            first = min(s for rid in rids for s, _ in by_run[rid])
            minute[tick] = max(minute[tick], (first - tick) / 1000)
    starts = sorted(s for rid, runs in by_run.items() for s, _ in runs)
    outages = []
    for n, e in enumerate(events):
        if e.kind.startswith("primary"):
            until = min([e.ended_ms + 30_000, *(x.began_ms for x in events[n + 1 : n + 2])])
            inside = [s for s in starts if e.began_ms - 1000 <= s <= until]
            gap = max((b - a for a, b in itertools.pairwise(inside)), default=0)
            outages.append({"kind": e.kind, "note": e.note, "gap_s": gap / 1000})
    pct = (lambda p: lags[min(len(lags) - 1, int(len(lags) * p))]) if lags else (lambda p: 0.0)
    return Verdict(
        seed=seed,
        durable=durable,
        seconds=(hi - lo) / 1000,
        events=[e.__dict__ for e in events],
        expected=len(expected),
        never_run=len(expected - set(by_tick)),
        doubled_triggers=sum(1 for k, rids in by_tick.items() if k in expected and len(rids) > 1),
        second_executions=len(twice),
        after_worker_fault=explained,
        by_failover=len(twice) - explained,
        unexpected=len(set(by_tick) - expected),
        stuck=sum(
            v for k, v in report.executions.items() if k in ("running", "queued", "stranded")
        ),
        lag_s={"p50": pct(0.5), "p99": pct(0.99), "max": lags[-1] if lags else 0.0},
        boundary_lag_s=[minute[t] for t in sorted(minute)],
        outages_s=outages,
        audit={
            "expected": report.expected,
            "fired": report.fired,
            "missing": report.missing,
            "duplicated": report.duplicated,
            "stranded": report.stranded,
            "executions": dict(report.executions),
        },
    )
