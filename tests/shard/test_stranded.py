"""The audit sees executions, not only records: a fired run that runs nowhere is stranded.

On an earlier main a full Redis made both workers exit; 4,429 of 5,800 fired ticks never
executed and the audit said 0 missing, because it counted run records. Here the runs fire
with no worker at all.
"""

from __future__ import annotations

from conftest import wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops.deployment.status import status_view
from shardsched.ops.history import audit
from shardsched.store.drive import drive_async
from shardsched.worker.worker import Worker


async def test_runs_fired_with_no_worker_are_stranded_until_one_runs_them(
    nursery, node, redis, dep
) -> None:
    specs = [
        JobSpec(name=f"s{i}", schedule=OnceSchedule(at=from_ms(0)), command="true")
        for i in range(20)
    ]
    await drive_async(ops.create_jobs(dep, specs), redis)

    async def fired() -> audit.AuditReport | None:
        report = await drive_async(audit.audit(dep, settle_s=0, stranded_after_s=0.5), redis)
        return report if report.fired == 20 else None

    await wait_until(fired, timeout=10)

    async def all_stranded() -> audit.AuditReport | None:
        report = await drive_async(audit.audit(dep, settle_s=0, stranded_after_s=0.5), redis)
        return report if report.executions.get("stranded") == 20 else None

    report = await wait_until(all_stranded, timeout=10)
    assert report.missing == 0 and report.duplicated == 0
    assert report.executions == {"stranded": 20}, report.executions
    assert report.stranded == 20 and len(report.stranded_runs) == 20
    assert not report.ok, "not OK while fired runs run nowhere"
    # with the default deadline they are merely queued
    fresh = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert fresh.executions == {"queued": 20} and fresh.ok
    # the status counts them from the streams (undelivered entries past the deadline)
    assert (await drive_async(status_view(dep), redis)).stranded == 0  # 5 min: not yet
    status = await drive_async(status_view(dep, stranded_after_ms=500), redis)
    assert status.stranded == 20 and sum(s.stranded for s in status.shards) == 20

    await nursery.start(Worker(redis, dep, worker_id="late-worker", concurrency=8).run)

    async def all_terminal() -> audit.AuditReport | None:
        r = await drive_async(audit.audit(dep, settle_s=0, stranded_after_s=0.5), redis)
        return r if r.executions == {"terminal": 20} else None

    report = await wait_until(all_terminal, timeout=15)
    assert report.ok and report.stranded == 0
    assert (await drive_async(status_view(dep, stranded_after_ms=500), redis)).stranded == 0
