"""DAG repair as operators do it daily: clear a task of a DAG run (with its downstream,
its upstream, or only what failed), mark one succeeded or failed with a note, and resume a
DAG run from a dead-lettered task. Each reads the DAG run, plans (core/dag_repair.py),
and, unless a dry run, applies the plan in one script that refuses it if the DAG run
moved (lua/repair_dag_run.lua): a plan is applied once, by whoever applies it first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.dag_repair import (
    ClearRequest,
    MarkRequest,
    PlannedTask,
    RepairPlan,
    Snapshot,
    fingerprint,
    plan_clear,
    plan_mark,
    plan_token,
    script_names,
)
from shardsched.core.errors import (
    AlreadyRetried,
    ConflictError,
    DagRunNotFound,
    RunNotFound,
    ValidationError,
)
from shardsched.core.ids import parse_dag_run_id, parse_run_id, parse_task_job_id
from shardsched.core.models import ExecSpec
from shardsched.core.validation import checked
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import control

_exec_decoder = msgspec.json.Decoder(ExecSpec)


@dataclass(frozen=True)
class _Read:
    snap: Snapshot
    version: int  #: the topology the repair runs on
    current_version: int
    topology: str  #: the hash the DAG run's topology is read from
    ran_on: int | None = None  #: the DAG run's own version, when no longer kept


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def read_snapshot(dep: Deployment, drid: str) -> Op:
    """The DAG run as a plan reads it, with the versions it and its DAG are on."""
    dag_id = parse_dag_run_id(drid)[0]
    sk = dep.keys_for(dag_id)
    raw, given, current = yield [
        Call(("HGETALL", sk.dag_run(drid))),
        Call(("HGET", sk.dag_run_given(drid), "tv")),
        Call(("HGET", sk.job(dag_id), "tv")),
    ]
    raw = check(raw)
    if not raw:
        raise DagRunNotFound(drid)
    fields = {raw[i].decode(): raw[i + 1].decode() for i in range(0, len(raw), 2)}
    current_v = int(check(current) or b"1")
    given_v = check(given)
    version = int(given_v) if given_v is not None else int(fields.get("tv", current_v))
    topology, ran_on = sk.job(dag_id), None
    if version != current_v:
        topology = sk.dag_version(dag_id, version)
    (order,) = yield [Call(("HGET", topology, "tasks"))]
    order = check(order)
    ours = {key[2:] for key in fields if key.startswith("t:")}
    if order is None:  # its version is no longer kept: repaired on the current one
        topology, ran_on, version = sk.job(dag_id), version, current_v
        (order,) = yield [Call(("HGET", topology, "tasks"))]
        order = check(order) or b""
        gone = sorted(ours - set(order.decode().split(",")))
        if gone:
            raise ConflictError(
                f"DAG run {drid!r} ran on version {ran_on} of its DAG, which is no longer "
                f"kept, and the current version has no task {', '.join(gone)}: trigger the "
                "DAG again instead"
            )
    in_order = [t for t in order.decode().split(",") if f"t:{t}" in fields]
    tasks = (*in_order, *sorted(ours - set(in_order)))  # and any a later one dropped
    deps_raw = yield [Call(("HGET", topology, f"d:{t}")) for t in tasks]
    deps = {
        t: tuple(d for d in (_text(check(r)) or "").split(",") if d)
        for t, r in zip(tasks, deps_raw, strict=True)
    }
    snap = Snapshot(
        state=fields.get("st", ""),
        tasks=tasks,
        codes={t: fields[f"t:{t}"] for t in tasks},
        latest={t: fields.get(f"r:{t}") for t in tasks},
        deps=deps,
    )
    return _Read(snap, version, current_v, topology, ran_on)


def _max_attempts(dep: Deployment, drid: str, read: _Read, tasks: list[str]) -> Op:
    """Each task's retry policy's max_attempts, from the spec of the version it runs on."""
    dag_id = parse_dag_run_id(drid)[0]
    if read.version == read.current_version:
        calls = [Call(("HGET", dep.keys_for(dag_id).job(f"{dag_id}.{t}"), "spec")) for t in tasks]
    else:
        calls = [Call(("HGET", read.topology, f"s:{t}")) for t in tasks]
    replies = (yield calls) if calls else []
    out: dict[str, int] = {}
    for task, reply in zip(tasks, replies, strict=True):
        spec = check(reply)
        if spec is not None:
            out[task] = _exec_decoder.decode(spec).retry_policy.max_attempts
    return out


def _run_states(dep: Deployment, read: _Read, rows: list[PlannedTask]) -> Op:
    """Each planned task's state as its latest run says it (dead_letter, skipped, …), not
    only as the DAG run's letter does (failed, upstream_failed)."""
    named = [(row, read.snap.latest.get(row.task)) for row in rows]
    asked = [(row, rid) for row, rid in named if rid is not None]
    replies = yield [Call(("HGET", dep.keys_for(rid).run(rid), "st")) for _, rid in asked]
    for (row, _), state in zip(asked, replies, strict=True):
        if check(state) is not None and row.state not in ("waiting", "running"):
            row.state = state.decode()


def _plan(
    read: _Read,
    drid: str,
    action: Literal["clear", "mark"],
    task: str,
    outcome: str,
    reset: list[str],
    rows: list[PlannedTask],
) -> RepairPlan:
    """The plan's answer, with the token that names it on the DAG run as read."""
    return RepairPlan(
        dag_run_id=drid,
        action=action,
        token=plan_token(read.snap, action, task, outcome, reset),
        dag_run_state=read.snap.state,
        topology_version=read.version,
        current_topology_version=read.current_version,
        ran_on_topology_version=read.ran_on,
        tasks=rows,
    )


def _require(read: _Read, drid: str, task: str) -> None:
    if task not in read.snap.tasks:
        raise ValidationError(f"DAG run {drid!r} has no task {task!r}", "$.task")
    if read.snap.state not in ("running", "succeeded", "failed"):
        raise ConflictError(
            f"DAG run {drid!r} is {read.snap.state}: only a running or ended one is "
            "repaired (trigger the DAG again instead)"
        )


def _stale(token: str | None, now: str, drid: str) -> None:
    if token is not None and token != now:
        raise ConflictError(
            f"DAG run {drid!r} is not as that plan read it (a task ended, a repair was "
            "applied, or the token is another plan's): nothing was done; make a new plan"
        )


def clear_tasks(dep: Deployment, drid: str, request: ClearRequest, actor: str = SDK_ACTOR) -> Op:
    """Clear a task of a DAG run (and its downstream, upstream, as asked); returns the
    RepairPlan, applied unless a dry run."""
    checked(request)
    read: _Read = yield from read_snapshot(dep, drid)
    _require(read, drid, request.task)
    candidates = [t for t in read.snap.tasks if read.snap.codes[t] not in ("q", "w")]
    budgets = yield from _max_attempts(dep, drid, read, candidates)
    reset, rows = plan_clear(read.snap, request, budgets)
    yield from _run_states(dep, read, rows)
    plan = _plan(read, drid, "clear", request.task, "", reset, rows)
    if request.dry_run:
        return plan
    _stale(request.token, plan.token, drid)
    if not reset:
        raise ConflictError(
            f"nothing to clear in DAG run {drid!r}: the tasks selected are running, not "
            "released yet, or succeeded (only_failed)"
        )
    return (yield from _apply(dep, drid, read, plan, reset, actor, request.note))


def mark_task(dep: Deployment, drid: str, request: MarkRequest, actor: str = SDK_ACTOR) -> Op:
    """Mark a task of a DAG run succeeded or failed, with a note; its skipped downstream is
    decided again. Returns the RepairPlan, applied unless a dry run."""
    checked(request)
    read: _Read = yield from read_snapshot(dep, drid)
    _require(read, drid, request.task)
    code = read.snap.codes[request.task]
    if code == "q":
        raise ConflictError(
            f"task {request.task!r} is running in DAG run {drid!r}: cancel its run, or wait "
            "for it to end, before marking it"
        )
    if code == request.state[0]:
        raise ConflictError(f"task {request.task!r} is {request.state} already")
    reset, rows = plan_mark(read.snap, request)
    yield from _run_states(dep, read, rows)
    plan = _plan(read, drid, "mark", request.task, request.state, reset, rows)
    if request.dry_run:
        return plan
    _stale(request.token, plan.token, drid)
    outcome = "s" if request.state == "succeeded" else "f"
    mark = (request.task, outcome)
    return (yield from _apply(dep, drid, read, plan, reset, actor, request.note, mark=mark))


def resume_dead_task(dep: Deployment, rid: str, actor: str = SDK_ACTOR) -> Op:
    """A dead-lettered DAG task's run sent back: its task is cleared with its downstream
    that did not succeed, and its DAG run resumes. Returns the task's new run id."""
    sk = dep.keys_for(rid)
    (fields,) = yield [Call(("HMGET", sk.run(rid), "st", "d", "nx"))]
    state, drid_raw, nx = check(fields)
    if state is None:
        raise RunNotFound(rid)
    if nx is not None:
        raise AlreadyRetried(rid, nx.decode())
    if state != b"dead_letter" or drid_raw is None:
        raise ConflictError(f"run {rid!r} is not dead-lettered")
    drid = drid_raw.decode()
    parts = parse_task_job_id(parse_run_id(rid).job_id)
    if parts is None:
        raise ConflictError(f"run {rid!r} is not a DAG task's")
    task = parts[1]
    read: _Read = yield from read_snapshot(dep, drid)
    if read.snap.latest.get(task) != rid:
        raise ConflictError(f"run {rid!r} is not its task's latest attempt in {drid!r}")
    _require(read, drid, task)
    request = ClearRequest(task=task, downstream=True, only_failed=True)
    reset, rows = plan_clear(read.snap, request, {})
    plan = _plan(read, drid, "clear", task, "", reset, rows)
    done = yield from _apply(dep, drid, read, plan, reset, actor, f"retry of {rid}", dead=rid)
    prefix = f"{parse_run_id(rid).job_id}:"
    return next((r for r in done.new_runs if r.startswith(prefix)), done.new_runs[0])


def _apply(
    dep: Deployment,
    drid: str,
    read: _Read,
    plan: RepairPlan,
    reset: list[str],
    actor: str,
    note: str,
    mark: tuple[str, str] | None = None,
    dead: str = "",
) -> Op:
    sk = dep.keys_for(parse_dag_run_id(drid)[0])
    marked, outcome = mark or ("", "")
    call = control.repair_dag_run(
        sk,
        drid,
        fingerprint(read.snap),  # the DAG run as the plan read it: checked atomically
        actor,
        note,
        script_names(read.snap, reset),
        len(read.snap.tasks),
        dead_lettered=dead,
        marked=marked,
        outcome=outcome,
    )
    (reply,) = yield [call]
    done = control.decode_repaired(check(reply), drid, dead)
    if done.queues:
        yield ready.push(dep.globals, [sk.shard], done.queues)
    plan.applied = True
    plan.new_runs = list(done.new_runs)
    return plan
