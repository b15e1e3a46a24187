"""Cancelling runs (lua/cancel_run.lua, lua/cancel_dag_run.lua, ops/runs/control.py): a running
command gets SIGTERM, then SIGKILL after its job's grace; the run ends ``cancelled`` with
who and why and is not retried; a queued, retrying or waiting run never starts; a DAG
task's cancel goes by its downstream's trigger rules; a whole DAG run ends at once and
frees its slot; a cancel racing completions ends each run in exactly one state. Real
node, real workers (in-process, spawning real commands), real Redis; the jobs keep their
own record in files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from conftest import drive_list, wait_until
from nodes import run_audit
from shardsched import ops
from shardsched.core.concurrency import LimitRequest
from shardsched.core.errors import ConflictError, DagRunNotFound, RunNotFound
from shardsched.core.instants import from_ms
from shardsched.core.models import (
    DagSpec,
    IntervalSchedule,
    JobSpec,
    OnceSchedule,
    RetryPolicy,
    TaskSpec,
)
from shardsched.ops import listing
from shardsched.ops.dags import dag_runs, manage
from shardsched.ops.deployment import concurrency
from shardsched.ops.history.changes import job_changes
from shardsched.ops.pagination import parse_cursor
from shardsched.ops.runs import control, events
from shardsched.ops.runs.active import Active, Filters, active_page
from shardsched.shard.manager import ShardManager
from shardsched.store import keys as k
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis
from shardsched.worker.handlers import HandlerContext, handler
from shardsched.worker.worker import Worker

_ran: list[str] = []


@handler("test-cancel-quick")
async def _quick(ctx: HandlerContext) -> None:
    await trio.sleep(float(ctx.args.get("s", 0.0)))
    _ran.append(ctx.run_id)


@handler("test-cancel-fail")
async def _fail(ctx: HandlerContext) -> None:
    raise RuntimeError("fails on purpose")


async def start(nursery: trio.Nursery, redis: Redis, dep, wid: str, slots: int = 8) -> Worker:
    w = Worker(redis, dep, worker_id=wid, concurrency=slots)
    await nursery.start(w.run)
    return w


async def create(redis: Redis, dep, spec: JobSpec) -> str:
    return (await drive_async(ops.create_job(dep, spec), redis)).job_id


async def newest(redis: Redis, dep, job_id: str):
    runs = await drive_list(listing.runs_page(dep, job_id), redis)
    return runs[0] if runs else None


async def run_in(redis: Redis, dep, job_id: str, *states: str, timeout: float = 30):
    async def found():
        run = await newest(redis, dep, job_id)
        return run if run is not None and run.state in states else None

    return await wait_until(found, timeout=timeout)


def once(name: str, command: str, **fields) -> JobSpec:
    return JobSpec(name=name, schedule=OnceSchedule(at=from_ms(0)), command=command, **fields)


def has(path: Path, text: str = ""):
    async def check() -> bool:
        return path.exists() and text in path.read_text()

    return check


def gone(pid: int):
    async def check() -> bool:
        return not alive(pid)

    return check


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def test_a_running_command_gets_sigterm_and_the_run_ends_cancelled(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment, tmp_path: Path
) -> None:
    await start(nursery, redis, dep, "w-cancel-1")
    marks = tmp_path / "marks"
    command = (
        f"trap 'echo term >> {marks}; exit 0' TERM; echo $$ > {tmp_path}/pid;"
        f" echo started >> {marks}; sleep 60 & wait"
    )
    job_id = await create(redis, dep, once("long", command, lease_s=3, kill_grace_s=5))
    run = await run_in(redis, dep, job_id, "running")
    await wait_until(has(marks, "started"), timeout=20)
    pid = int((tmp_path / "pid").read_text())

    cancelled = await drive_async(control.cancel_run(dep, run.run_id, "alice", "wrong args"), redis)
    assert cancelled.state == "cancelled" and cancelled.cancelled_by == "alice"
    assert cancelled.reason == "cancelled by alice: wrong args"
    # the worker learns at its next renewal (a third of the 3 s lease) and sends SIGTERM:
    # the job's own trap records it, and the process is gone
    await wait_until(has(marks, "term"), timeout=20)
    await wait_until(gone(pid), timeout=20)
    # not retried, and it stays cancelled: the worker reports nothing for it
    await trio.sleep(1)  # a quiet period: a renewal and a refused completion would land
    runs = await drive_list(listing.runs_page(dep, job_id), redis)
    assert [(r.run_id, r.state) for r in runs] == [(run.run_id, "cancelled")]
    with pytest.raises(ConflictError, match="has ended"):
        await drive_async(control.cancel_run(dep, run.run_id, "bob"), redis)
    changes = await drive_async(job_changes(dep, job_id), redis)
    assert any(c.action == "cancel" and c.by == "alice" for c in changes.changes)
    report = await run_audit(redis, dep)
    assert report.ok, report


async def test_a_command_that_ignores_sigterm_is_killed_after_its_grace(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment, tmp_path: Path
) -> None:
    await start(nursery, redis, dep, "w-cancel-2")
    command = f"trap '' TERM; echo $$ > {tmp_path}/pid; sleep 120"
    job_id = await create(redis, dep, once("stubborn", command, lease_s=3, kill_grace_s=1))
    run = await run_in(redis, dep, job_id, "running")
    await wait_until(has(tmp_path / "pid"), timeout=20)
    pid = int((tmp_path / "pid").read_text())
    await drive_async(control.cancel_run(dep, run.run_id, "alice"), redis)
    await wait_until(gone(pid), timeout=20)
    assert (await newest(redis, dep, job_id)).state == "cancelled"


async def test_a_queued_run_never_starts(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    _ran.clear()
    job_id = await create(redis, dep, once("queued", "handler:test-cancel-quick"))
    run = await run_in(redis, dep, job_id, "scheduled")
    listed = await drive_async(active_page(dep, Active.QUEUED, 50), redis)
    assert run.run_id in [r.run_id for r in listed.runs]
    await drive_async(control.cancel_run(dep, run.run_id, "alice"), redis)
    other = await create(redis, dep, once("after", "handler:test-cancel-quick"))
    await start(nursery, redis, dep, "w-cancel-3")
    await run_in(redis, dep, other, "succeeded")  # the worker is claiming: ours was passed
    assert run.run_id not in _ran
    assert (await newest(redis, dep, job_id)).state == "cancelled"
    listed = await drive_async(active_page(dep, Active.QUEUED, 50), redis)
    assert run.run_id not in [r.run_id for r in listed.runs]
    report = await run_audit(redis, dep)
    assert report.ok, report


async def test_a_failed_attempts_id_cancels_the_retry_waiting_its_turn(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    await start(nursery, redis, dep, "w-cancel-4")
    retry = RetryPolicy(max_attempts=3, base_s=3600, jitter=False)
    job_id = await create(redis, dep, once("flaky", "handler:test-cancel-fail", retry_policy=retry))
    retrying = await run_in(redis, dep, job_id, "retrying")
    listed = await drive_async(active_page(dep, Active.RETRYING, 50), redis)
    assert [r.run_id for r in listed.runs] == [retrying.run_id]
    first = retrying.run_id.rsplit(":", 1)[0] + ":1"
    cancelled = await drive_async(control.cancel_run(dep, first, "alice"), redis)
    assert cancelled.run_id == retrying.run_id and cancelled.state == "cancelled"
    sk = dep.keys_for(job_id)
    assert await redis.execute("ZSCORE", sk.retries, retrying.run_id) is None
    listed = await drive_async(active_page(dep, Active.RETRYING, 50), redis)
    assert listed.runs == []


async def test_a_waiting_run_leaves_the_line_and_the_next_gets_its_turn(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    _ran.clear()
    await drive_async(concurrency.set_limits(dep, "db", LimitRequest(limit=1), "t"), redis)
    await start(nursery, redis, dep, "w-cancel-5")
    ids = []
    for i, s in enumerate((1.5, 0, 0)):
        spec = once(f"k{i}", "handler:test-cancel-quick", concurrency_key="db", args={"s": s})
        ids.append(await create(redis, dep, spec))
        if i == 0:
            await run_in(redis, dep, ids[0], "running")
    waiting = await run_in(redis, dep, ids[1], "waiting")
    await run_in(redis, dep, ids[2], "waiting")
    listed = await drive_async(active_page(dep, Active.WAITING, 50), redis)
    assert {r.run_id for r in listed.runs} >= {waiting.run_id}
    await drive_async(control.cancel_run(dep, waiting.run_id, "alice"), redis)
    await run_in(redis, dep, ids[2], "succeeded")
    assert waiting.run_id not in _ran
    view = await drive_async(concurrency.get_key(dep, "db"), redis)
    assert view.waiting == 0 and view.running == 0


async def test_cancel_races_completion_and_each_run_ends_in_one_state(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    for i in range(3):
        await start(nursery, redis, dep, f"w-race-{i}", slots=4)
    # every tenth run long enough that the cancel surely finds it running (in CI, with
    # the box loaded, every run of 0 - 0.3 s once ended before the loop reached it)
    ids = [
        await create(
            redis,
            dep,
            once(
                f"race{i}",
                "handler:test-cancel-quick",
                args={"s": 0.05 * (i % 7) + 5 * (i % 10 == 9)},
            ),
        )
        for i in range(60)
    ]
    outcome: dict[str, str] = {}
    for job_id in ids:
        run = await run_in(redis, dep, job_id, "scheduled", "running", "succeeded")
        try:
            await drive_async(control.cancel_run(dep, run.run_id, "racer"), redis)
            outcome[run.run_id] = "cancelled"
        except ConflictError:
            outcome[run.run_id] = "succeeded"
    assert set(outcome.values()) == {"cancelled", "succeeded"}, outcome  # both sides won
    for rid, want in outcome.items():
        run = await run_in(redis, dep, rid.split(":")[0], want, timeout=30)
        assert run.run_id == rid and run.attempt == 1
    await trio.sleep(1.5)  # a quiet period: a refused completion would land in it
    ends: dict[str, list[str]] = {}
    after = None
    while True:
        page = await drive_async(events.events_page(dep, 1000, after), redis)
        for e in page.events:
            if e.run_id in outcome and e.new in ("succeeded", "cancelled", "failed"):
                ends.setdefault(e.run_id, []).append(e.new)
        if not page.events:
            break
        after = page.next_cursor
    assert ends == {rid: [want] for rid, want in outcome.items()}
    for rid, want in outcome.items():
        assert (await newest(redis, dep, rid.split(":")[0])).state == want
    report = await run_audit(redis, dep)
    assert report.ok, report


def _dag(name: str, tmp_path: Path) -> DagSpec:
    return DagSpec(
        name=name,
        schedule=IntervalSchedule(every_s=86400),
        max_active_runs=1,
        tasks=[
            TaskSpec(name="extract", command=f"echo $$ > {tmp_path}/pid; sleep 60", lease_s=3),
            TaskSpec(name="load", command="true", depends_on=["extract"]),
            TaskSpec(
                name="cleanup", command="true", depends_on=["extract"], trigger_rule="all_done"
            ),
        ],
    )


async def test_cancelling_a_dag_task_goes_by_its_downstreams_rules(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment, tmp_path: Path
) -> None:
    await start(nursery, redis, dep, "w-cancel-dag-1")
    dag_id = (await drive_async(manage.create_dag(dep, _dag("etl1", tmp_path)), redis)).dag_id
    drid = (await drive_async(manage.trigger_dag(dep, dag_id), redis)).dag_run_id
    extract = await run_in(redis, dep, k.task_job_id(dag_id, "extract"), "running")
    await drive_async(control.cancel_run(dep, extract.run_id, "alice", "stuck"), redis)

    async def settled():
        run = await drive_async(dag_runs.get_dag_run(dep, drid), redis)
        return run if run.state in ("failed", "succeeded") else None

    run = await wait_until(settled, timeout=30)
    states = {t.task: t.state for t in run.tasks}
    assert states == {"extract": "cancelled", "load": "skipped", "cleanup": "succeeded"}
    assert run.state == "failed"


async def test_cancelling_a_dag_run_ends_it_and_frees_its_slot(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment, tmp_path: Path
) -> None:
    await start(nursery, redis, dep, "w-cancel-dag-2")
    dag_id = (await drive_async(manage.create_dag(dep, _dag("etl2", tmp_path)), redis)).dag_id
    first = (await drive_async(manage.trigger_dag(dep, dag_id), redis)).dag_run_id
    await run_in(redis, dep, k.task_job_id(dag_id, "extract"), "running")
    await wait_until(has(tmp_path / "pid"), timeout=20)
    pid = int((tmp_path / "pid").read_text())
    (tmp_path / "pid").unlink()
    second = await drive_async(manage.trigger_dag(dep, dag_id), redis)
    queued = await drive_async(dag_runs.get_dag_run(dep, second.dag_run_id), redis)
    assert queued.state == "queued"  # max_active_runs 1

    run = await drive_async(control.cancel_dag_run(dep, first, "alice", "bad data"), redis)
    assert run.state == "cancelled" and run.reason == "cancelled by alice: bad data"
    states = {t.task: t.state for t in run.tasks}
    assert states == {"extract": "cancelled", "load": "skipped", "cleanup": "skipped"}
    await wait_until(gone(pid), timeout=20)  # its running task was stopped
    # its slot is free: the queued DAG run started
    await wait_until(has(tmp_path / "pid"), timeout=20)
    started = await drive_async(dag_runs.get_dag_run(dep, second.dag_run_id), redis)
    assert started.state == "running"
    with pytest.raises(ConflictError):
        await drive_async(control.cancel_dag_run(dep, first, "alice"), redis)
    # a queued one is cancelled too, without ever starting
    third = (await drive_async(manage.trigger_dag(dep, dag_id), redis)).dag_run_id
    never = await drive_async(control.cancel_dag_run(dep, third, "bob"), redis)
    assert never.state == "cancelled" and all(t.state == "waiting" for t in never.tasks)
    await drive_async(control.cancel_dag_run(dep, second.dag_run_id, "alice"), redis)


async def test_unknown_ids_are_not_found(redis: Redis, dep: ops.Deployment) -> None:
    with pytest.raises(RunNotFound):
        await drive_async(control.cancel_run(dep, "nope:1:1", "alice"), redis)
    with pytest.raises(DagRunNotFound):
        await drive_async(control.cancel_dag_run(dep, "dag_nope:1", "alice"), redis)


async def test_runs_under_way_are_listed_across_jobs_and_filtered(
    nursery: trio.Nursery, node: ShardManager, redis: Redis, dep: ops.Deployment, tmp_path: Path
) -> None:
    await start(nursery, redis, dep, "w-list-a", slots=3)
    ids = [await create(redis, dep, once(f"busy{i}", "sleep 30", lease_s=3)) for i in range(5)]

    async def three_running():
        page = await drive_async(active_page(dep, Active.RUNNING, 50), redis)
        return page.runs if len(page.runs) == 3 else None

    running = await wait_until(three_running, timeout=30)  # which three: the claims' order
    busy = {r.job_id for r in running}
    page1 = await drive_async(active_page(dep, Active.RUNNING, 2), redis)
    assert len(page1.runs) == 2 and page1.next_cursor
    page2 = await drive_async(
        active_page(dep, Active.RUNNING, 2, parse_cursor(page1.next_cursor)), redis
    )
    got = [r.run_id for r in page1.runs + page2.runs]
    assert sorted(got) == sorted(r.run_id for r in running)
    assert all(r.claimed_by == "w-list-a" for r in page1.runs + page2.runs)
    one = sorted(busy)[0]
    only = await drive_async(active_page(dep, Active.RUNNING, 50, None, Filters(one)), redis)
    assert [r.job_id for r in only.runs] == [one]
    none = await drive_async(
        active_page(dep, Active.RUNNING, 50, None, Filters(worker="w-other")), redis
    )
    assert none.runs == []
    queued = await drive_async(active_page(dep, Active.QUEUED, 50), redis)
    assert sorted(r.job_id for r in queued.runs) == sorted(set(ids) - busy)
    for job_id in ids:
        await drive_async(
            control.cancel_run(dep, (await newest(redis, dep, job_id)).run_id, "t"), redis
        )
