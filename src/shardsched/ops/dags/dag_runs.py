"""A DAG's runs read back: one DAG run with its tasks' states and attempts, from Redis or
from the cold archive (a DAG run that left under its DAG's retention)."""

from __future__ import annotations

from shardsched.core.errors import DagNotFound, DagRunNotFound
from shardsched.core.ids import parse_dag_run_id, parse_run_id, with_attempt
from shardsched.core.models import TaskState
from shardsched.core.views import DagRun, DagTaskRun
from shardsched.ops.cold import archive_url, cold_dag_runs, cold_runs
from shardsched.store import keys as k
from shardsched.store.archive_rows import ArchivedRecord
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.records import (
    RUN_FIELDS,
    dag_run_from,
    opt_from_ms,
    run_record,
    run_view,
)


def task_order(dep: Deployment, dag_id: str) -> Op:
    (tasks,) = yield [Call(("HGET", dep.keys_for(dag_id).job(dag_id), "tasks"))]
    tasks = check(tasks)
    if tasks is None:
        raise DagNotFound(dag_id)
    return tasks.decode().split(",")


def get_dag_run(dep: Deployment, drid: str) -> Op:
    """One DAG run with every task's state and every attempt of each."""
    dag_id = parse_dag_run_id(drid)[0]
    if not k.is_dag_id(dag_id):
        raise DagRunNotFound(drid)
    sk = dep.keys_for(dag_id)
    (raw,) = yield [Call(("HGETALL", sk.dag_run(drid)))]
    archived = False
    if not check(raw):
        cold = cold_dag_runs(dep, (yield from archive_url(dep)), dag_id, drid=drid)
        if not cold:
            raise DagRunNotFound(drid)
        raw, archived = record_fields(cold[0][1]), True
    tasks = yield from task_order(dep, dag_id)
    run = dag_run_from(drid, raw, tasks)
    run.archived = archived
    yield from fill_states(dep, [run], with_attempts=True)
    return run


def record_fields(record: ArchivedRecord) -> list[bytes]:
    """An archived DAG run's fields as HGETALL answers them."""
    return [part.encode() for item in record.fields.items() for part in item]


def fill_states(dep: Deployment, runs: list[DagRun], with_attempts: bool) -> Op:
    """Each released task's state is its latest run's (and, if asked, every attempt)."""
    wanted: list[tuple[DagTaskRun, list[str]]] = []
    for run in runs:
        for task in run.tasks:
            if task.run_id is None:
                continue
            attempt = parse_run_id(task.run_id).attempt
            first = 1 if with_attempts else attempt
            wanted.append((task, [with_attempt(task.run_id, n) for n in range(first, attempt + 1)]))
    calls = [
        Call(("HMGET", dep.keys_for(rid).run(rid), *RUN_FIELDS))
        for _, rids in wanted
        for rid in rids
    ]
    if not calls:
        return
    records = [run_record(check(reply)) for reply in (yield calls)]
    every_rid = [rid for (_, rids) in wanted for rid in rids]
    gone = [rid for rid, record in zip(every_rid, records, strict=True) if record is None]
    url = (yield from archive_url(dep)) if gone else None
    archived = cold_runs(dep, url, gone)  # task runs that left for the archive
    records_of = iter(records)
    for task, rids in wanted:
        attempts = []
        stalled = None
        for rid in rids:
            record = next(records_of)
            if record is not None:
                attempts.append(run_view(rid, record))
                stalled = record.stalled_ms or stalled
            elif rid in archived:
                attempts.append(archived[rid])
        if attempts:
            latest = attempts[-1]
            task.state = TaskState(latest.state)
            task.reason = latest.reason
        task.stalled_at = opt_from_ms(stalled)
        if with_attempts:
            task.attempts = attempts
