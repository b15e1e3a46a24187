"""A worker SIGTERMed in the middle of a burst, and started again at once under the same
id (a deploy): nothing it ran is run again. Before the drain waited for its completer's
batch on the way, that batch was lost with the process, and the successor took its runs
up as its own and ran them a second time (774 of a 25,000-job boundary in
``bench deploy``). Judged by the record the jobs write themselves."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
import redis as redis_py

from shardsched.bench.burst import server_ms
from shardsched.bench.fleet import Fleet, read_record
from shardsched.bench.harness import BenchRedis
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops.history import audit
from shardsched.sdk import Client

JOBS = 6000


pytestmark = pytest.mark.processes


def test_workers_restarted_mid_burst_run_nothing_twice() -> None:
    root = Path(tempfile.mkdtemp(prefix="shardsched-drain-"))
    record = root / "record"
    record.mkdir()
    server = BenchRedis("off")
    server.start()
    r = redis_py.Redis(port=server.port)
    fleet = Fleet(server.url, "drain", root, env={"SHARDSCHED_BENCH_RECORD": str(record)})
    fleet.worker_args = ("--import", "shardsched.bench.record_handler", "--concurrency", "500")
    client = Client(server.url, "drain")
    try:
        at = from_ms(server_ms(r) + 6000)
        specs = (
            JobSpec(name=f"j{i}", schedule=OnceSchedule(at=at), command="handler:bench-record")
            for i in range(JOBS)
        )
        client.add_jobs(specs, batch=2000)
        fleet.node("node-a")
        for name in ("worker-a", "worker-b", "worker-c"):
            fleet.worker(name)
        # ready before they are restarted, as a deploy waits: a SIGTERM before a worker has
        # its handler kills it (-15 each in a CI that started them slower than the lead)
        fleet.wait_ready()
        due_ms = int(at.timestamp() * 1000)
        while server_ms(r) < due_ms + 100:
            time.sleep(0.005)  # the poll's pace, on the server's clock: until the due time
        for name in ("worker-a", "worker-b", "worker-c"):  # in turn, through the burst
            fleet.restart(name)
        deadline = time.monotonic() + 60
        while True:
            report = client._run(audit.audit(client.deployment, settle_s=0.0))
            if report.executions.get("terminal", 0) == JOBS or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # the poll's pace: until every run is terminal (the audit)
        fleet.check()
    finally:
        fleet.stop_all()
        client.close()
        r.close()
        server.stop()
    executions, _ = read_record(record)
    assert (report.fired, report.missing, report.duplicated) == (JOBS, 0, 0), report
    assert report.executions.get("terminal") == JOBS, report.executions
    assert fleet.exits == {}, fleet.exits
    assert len(executions) == JOBS, "every run executed"
    twice = sum(1 for n in executions.values() if n > 1)
    assert twice == 0, f"{twice} runs executed twice through a graceful restart"
    assert [code for _, _, code in fleet.restarts] == [0, 0, 0]
