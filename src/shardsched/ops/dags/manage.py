"""The DAG operations (register, read, pause/resume/delete, trigger, DAG runs), free of I/O.

Written as :mod:`shardsched.ops` generators, so the router and the SDK drive the same
code and the same Lua scripts. A DAG is stored like a job with a timer entry (its hash
``job:<dag_id>`` also holds its topology, see ``lua/lib/dag.lua``); its tasks are jobs
``<dag_id>.<task>`` in the DAG's shard, which is what makes every dependency decision one
atomic script.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.app_sets import check_owner
from shardsched.core.dag import stored_task, validate_dag
from shardsched.core.errors import (
    ConflictError,
    DagDeleted,
    DagNotFound,
    IdTaken,
    ShardschedError,
    ValidationError,
)
from shardsched.core.ids import dag_id_of, parse_task_job_id
from shardsched.core.instants import from_ms
from shardsched.core.labels import ACCOUNT_LABEL
from shardsched.core.models import DagRunState, DagSpec, JobSpec, JobStatus, TaskSpec, Timing
from shardsched.core.params import TriggerRequest, validate_args
from shardsched.core.queues import stored as stored_queue
from shardsched.core.schedule import first_planned_ms
from shardsched.core.schedule_words import schedule_words
from shardsched.core.timing import resolved
from shardsched.core.views import Dag, DagCreated, DagTriggered, JobCreated
from shardsched.ops import triggers
from shardsched.store import keys as k
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import dags as lua
from shardsched.store.lua import jobs as jobs_lua
from shardsched.store.records import DAG_FIELDS, dag_record, opt_from_ms

_encoder = msgspec.json.Encoder()
_dag_decoder = msgspec.json.Decoder(DagSpec)


def dag_timing(spec: DagSpec, dag_id: str) -> Timing:
    """A DAG's timer entry fires like a job's (the ``H`` of its cron resolved for it);
    concurrency is max_active_runs' business."""
    schedule = resolved(spec.schedule, dag_id)
    team = spec.labels.get(ACCOUNT_LABEL, "")
    return Timing(
        schedule, spec.catchup, spec.misfire_grace_s, max_catchup=spec.max_catchup, team=team
    )


def _timing_of_view(dag: Dag) -> Timing:
    schedule = resolved(dag.schedule, dag.dag_id)
    team = dag.labels.get(ACCOUNT_LABEL, "")
    return Timing(
        schedule, dag.catchup, dag.misfire_grace_s, max_catchup=dag.max_catchup, team=team
    )


def dag_first_ms(spec: DagSpec, dag_id: str, now_ms: int) -> int | None:
    return first_planned_ms(dag_timing(spec, dag_id), dag_id, now_ms)


def task_items(spec: DagSpec) -> tuple[str, str, list[Any]]:
    topo = validate_dag(spec)
    items: list[Any] = []
    for task in spec.tasks:
        task = stored_task(task, spec.labels)
        items += lua.task_item(
            task.name,
            task.depends_on,
            topo.downstream[task.name],
            task.trigger_rule,
            _encoder.encode(task),
            round(task.lease_s * 1000),
            stored_queue(task.queue, task.priority, task.concurrency_key),
        )
    return ",".join(topo.order), ",".join(topo.roots), items


def create_dag(dep: Deployment, spec: DagSpec, actor: str = SDK_ACTOR, writer: str = "") -> Op:
    """:func:`create_dag_unlocked`, holding the lock of ``after`` chains when the DAG runs
    after another (ops/triggers.py)."""
    op = create_dag_unlocked(dep, spec, actor, writer)
    if any(r.after for r in spec.on):
        return (yield from triggers.locked(dep, op))
    return (yield from op)


def create_dag_unlocked(
    dep: Deployment, spec: DagSpec, actor: str = SDK_ACTOR, writer: str = ""
) -> Op:
    """Register a DAG (validated first: nothing is written for an invalid one); ``writer``:
    the app set a deploy writes as ('' by hand: core/apps.check_owner)."""
    order, roots, items = task_items(spec)
    check_owner(None, spec.labels, writer)
    dag_id = dag_id_of(spec.id) if spec.id else k.new_dag_id()
    yield from triggers.declare(dep, dag_id, spec.on)  # before: no event or end missed
    (now,) = yield [Call(("TIME",))]
    first = dag_first_ms(spec, dag_id, server_ms(now))
    spec = msgspec.structs.replace(spec, id=None)  # the id is the key, not the definition
    sk = dep.keys_for(dag_id)
    (reply,) = yield [
        lua.register_dag(
            sk,
            dep.globals,
            dag_id,
            spec_json=_encoder.encode(spec),
            timing_json=_encoder.encode(dag_timing(spec, dag_id)),
            first_ms=first,
            max_active_runs=spec.max_active_runs,
            stall_sla_ms=round(spec.stall_sla_s * 1000),
            catchup=spec.catchup,
            order=order,
            roots=roots,
            task_items=items,
            actor=actor,
        )
    ]
    if not lua.decode_registered_dag(check(reply)):  # chosen, or a 48-bit random id collided
        raise IdTaken(dag_id)
    return DagCreated(
        dag_id=dag_id,
        next_run_at=None if first is None else from_ms(first),
        task_job_ids={t.name: k.task_job_id(dag_id, t.name) for t in spec.tasks},
    )


def dag_calls(dep: Deployment, dag_id: str) -> list[Call]:
    sk = dep.keys_for(dag_id)
    return [
        Call(("HMGET", sk.job(dag_id), *DAG_FIELDS)),
        Call(("ZSCORE", sk.timer, dag_id)),
        Call(("ZCARD", sk.dag_queue(dag_id))),
        Call(("HGET", sk.counters(dag_id), "nact")),
    ]


def dag_from(dep: Deployment, dag_id: str, replies: Sequence[Any]) -> Dag:
    fields, score, queued, counted = (check(r) for r in replies)
    rec = dag_record(fields) if k.is_dag_id(dag_id) else None
    if rec is None:
        raise DagNotFound(dag_id)
    spec = _dag_decoder.decode(rec.spec)
    return Dag(
        dag_id=dag_id,
        name=spec.name,
        schedule=spec.schedule,
        schedule_words=schedule_words(spec.schedule),
        tasks=spec.tasks,
        task_job_ids={t.name: k.task_job_id(dag_id, t.name) for t in spec.tasks},
        max_active_runs=spec.max_active_runs,
        catchup=spec.catchup,
        misfire_grace_s=spec.misfire_grace_s,
        stall_sla_s=spec.stall_sla_s,
        status=JobStatus(rec.status),
        next_run_at=None if score is None else from_ms(int(float(score))),
        active_runs=rec.active + int(counted or 0),  # lua/lib/counters.lua
        queued_runs=int(queued),
        stalled_tasks=rec.stalled,
        created_at=from_ms(rec.created_ms),
        updated_at=from_ms(rec.updated_ms),
        version=rec.version,
        shard=dep.keys_for(dag_id).shard,
        max_catchup=spec.max_catchup,
        retention=spec.retention,
        labels=spec.labels,
        incarnation=rec.incarnation or 1,
        incarnation_started_at=opt_from_ms(rec.incarnation_ms),
        on=spec.on,
    )


def get_dag(dep: Deployment, dag_id: str) -> Op:
    if not k.is_dag_id(dag_id):
        raise DagNotFound(dag_id)
    replies = yield dag_calls(dep, dag_id)
    return dag_from(dep, dag_id, replies)


def set_dag_status(dep: Deployment, dag_id: str, status: JobStatus, actor: str = SDK_ACTOR) -> Op:
    """Pause (the timer entry goes; open DAG runs finish) or resume (the next tick from now,
    under the DAG's catch-up policy); returns the Dag."""
    for _attempt in range(16):
        dag = yield from get_dag(dep, dag_id)
        if dag.status == JobStatus.DELETED:
            raise DagDeleted(dag_id)
        if dag.status == status:
            return dag
        (now,) = yield [Call(("TIME",))]
        next_fire: int | str = ""
        if status == JobStatus.ACTIVE:
            first = first_planned_ms(_timing_of_view(dag), dag_id, server_ms(now))
            next_fire = "" if first is None else first
        change = "pause" if status == JobStatus.PAUSED else "resume"
        if (yield from _write_status(dep, dag, status, next_fire, actor, change)):
            return (yield from get_dag(dep, dag_id))
    raise ShardschedError(f"DAG {dag_id!r} is being changed concurrently; try again")


def _write_status(
    dep: Deployment,
    dag: Dag,
    status: JobStatus,
    next_fire: int | str,
    actor: str,
    change: str,
    detail: str = "",
) -> Op:
    """A DAG's status (and next fire) rewritten over its definition as it is, if it is
    still at ``dag.version`` (update_job.lua; from deleted only as a ``recreate``);
    returns whether it was written."""
    sk = dep.keys_for(dag.dag_id)
    spec_raw, timing = yield [
        Call(("HGET", sk.job(dag.dag_id), "spec")),
        Call(("HGET", sk.job(dag.dag_id), "timing")),
    ]
    (reply,) = yield [
        jobs_lua.update_job(
            sk,
            dep.globals,
            dag.dag_id,
            version=dag.version,
            spec_json=check(spec_raw),
            timing_json=check(timing),
            status=status.value,
            next_fire=next_fire,
            lease_ms=0,
            roll=True,
            actor=actor,
            change=change,
            detail=detail,
            revive=change == "recreate",
        )
    ]
    code = check(reply)[0]
    jobs_lua.raise_refusal(code, dag.dag_id, dag=True)
    return code == jobs_lua.JobReply.OK


def restore_dag(dep: Deployment, dag_id: str, actor: str = SDK_ACTOR) -> Op:
    """Bring a deleted DAG back with its last definition, as its next incarnation (its
    DAG runs and changes stay; its ticks begin from now); returns the Dag. Not deleted:
    ConflictError."""
    for _attempt in range(16):
        dag = yield from get_dag(dep, dag_id)
        if dag.status != JobStatus.DELETED:
            raise ConflictError(
                f"DAG {dag_id!r} is {dag.status.value}: only a deleted one is restored"
            )
        yield from triggers.declare(dep, dag_id, dag.on)  # it listens again
        (now,) = yield [Call(("TIME",))]
        first = first_planned_ms(_timing_of_view(dag), dag_id, server_ms(now))
        next_fire = "" if first is None else first
        detail = f"incarnation {dag.incarnation + 1}"
        if (
            yield from _write_status(
                dep, dag, JobStatus.ACTIVE, next_fire, actor, "recreate", detail
            )
        ):
            return (yield from get_dag(dep, dag_id))
    raise ShardschedError(f"DAG {dag_id!r} is being changed concurrently; try again")


def delete_dag(dep: Deployment, dag_id: str, actor: str = SDK_ACTOR) -> Op:
    """Delete a DAG: no more ticks; open DAG runs finish; definition and history stay.
    Deleting it again changes nothing and answers the same."""
    dag = yield from get_dag(dep, dag_id)
    if dag.status == JobStatus.DELETED:
        return dag
    sk = dep.keys_for(dag_id)
    (reply,) = yield [jobs_lua.delete_job(sk, dep.globals, dag_id, actor)]
    code = check(reply)[0]
    if code != jobs_lua.JobReply.DELETED:  # deleted meanwhile by another DELETE: the same
        jobs_lua.raise_refusal(code, dag_id, dag=True)
    yield from triggers.retract(dep, dag_id, dag.on, [])
    return (yield from get_dag(dep, dag_id))


def trigger_dag(
    dep: Deployment, dag_id: str, actor: str = SDK_ACTOR, request: TriggerRequest | None = None
) -> Op:
    """Open a DAG run now, its tasks given the request's args; returns DagTriggered
    (started, or queued under max_active_runs)."""
    request = request or TriggerRequest()
    if request.idempotency_key is not None:
        raise ValidationError("a DAG's trigger takes no idempotency key", "$.idempotency_key")
    args_json = validate_args(request.args)
    if not k.is_dag_id(dag_id):
        raise DagNotFound(dag_id)
    sk = dep.keys_for(dag_id)
    (reply,) = yield [lua.trigger_dag(sk, dag_id, actor, args_json)]
    reply = check(reply)
    jobs_lua.raise_refusal(reply[0], dag_id, dag=True)  # DagTrigger's refusals are JobReply's
    if reply[0] == lua.DagTrigger.STARTED:
        yield ready.push(dep.globals, [sk.shard], ready.woken(reply[3]))
    return DagTriggered(
        dag_run_id=reply[1].decode(),
        scheduled_for=from_ms(int(reply[2])),
        state=DagRunState.RUNNING if reply[0] == lua.DagTrigger.STARTED else DagRunState.QUEUED,
    )


def join_dag(dep: Deployment, spec: JobSpec, actor: str = SDK_ACTOR) -> Op:
    """A job registered with depends_on joins its dependencies' DAG as a new task."""
    dag_ids = set()
    deps: list[str] = []
    for i, job_id in enumerate(spec.depends_on):
        task_of = parse_task_job_id(job_id)
        if task_of is None:
            raise ValidationError(
                f"{job_id!r} is not a DAG task's job id (<dag_id>.<task>)",
                f"$.depends_on[{i}]",
            )
        dag_id, dep_task = task_of
        dag_ids.add(dag_id)
        deps.append(dep_task)
        if len(dag_ids) > 1:
            raise ValidationError(
                "every dependency must be a task of the same DAG", f"$.depends_on[{i}]"
            )
    (dag_id,) = dag_ids
    task = TaskSpec(
        name=spec.name,
        command=spec.command,
        timeout_s=spec.timeout_s,
        kill_grace_s=spec.kill_grace_s,
        retry_policy=spec.retry_policy,
        depends_on=list(dict.fromkeys(deps)),
        trigger_rule=spec.trigger_rule,
        lease_s=spec.lease_s,
        env=spec.env,
        queue=spec.queue,
        priority=spec.priority,
        concurrency_key=spec.concurrency_key,
        concurrency_limit=spec.concurrency_limit,
    )
    sk = dep.keys_for(dag_id)
    job_id = k.task_job_id(dag_id, spec.name)
    for _attempt in range(16):
        try:
            dag = yield from get_dag(dep, dag_id)
        except DagNotFound:
            raise ValidationError(f"no DAG {dag_id!r}", "$.depends_on[0]") from None
        if dag.status == JobStatus.DELETED:
            raise DagDeleted(dag_id)
        names = {t.name for t in dag.tasks}
        for i, name in enumerate(deps):
            if name not in names:
                raise ValidationError(f"DAG {dag_id!r} has no task {name!r}", f"$.depends_on[{i}]")
        if spec.name in names:
            raise ValidationError(f"DAG {dag_id!r} already has a task {spec.name!r}", "$.name")
        if len(dag.tasks) >= 1000:
            raise ValidationError(f"DAG {dag_id!r} has 1000 tasks, the most allowed", "$.name")
        (spec_raw,) = yield [Call(("HGET", sk.job(dag_id), "spec"))]
        new_spec = _dag_decoder.decode(check(spec_raw))
        new_spec.tasks.append(task)
        stored = stored_task(task, new_spec.labels, "$")
        (reply,) = yield [
            lua.add_dag_task(
                sk,
                dag_id,
                job_id,
                version=dag.version,
                task=spec.name,
                dependencies=",".join(task.depends_on),
                rule=task.trigger_rule,
                task_json=_encoder.encode(stored),
                lease_ms=round(task.lease_s * 1000),
                dag_json=_encoder.encode(new_spec),
                actor=actor,
                queue=stored_queue(task.queue, task.priority, stored.concurrency_key),
            )
        ]
        code = check(reply)[0]
        if code == lua.AddTask.ADDED:
            return JobCreated(job_id=job_id, next_run_at=dag.next_run_at)
        if code == lua.AddTask.DELETED:
            raise DagDeleted(dag_id)
        if code == lua.AddTask.NAME_TAKEN:
            raise ValidationError(f"DAG {dag_id!r} already has a task {spec.name!r}", "$.name")
        # -3 the DAG changed meanwhile, -5 a dependency vanished with it: read again
    raise ShardschedError(f"DAG {dag_id!r} is being changed concurrently; try again")
