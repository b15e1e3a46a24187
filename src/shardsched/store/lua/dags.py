"""Wrappers of the DAG scripts: register, replace, add a task, trigger, report stalls."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from shardsched.core.models import Catchup, TriggerRule
from shardsched.store.calls import Call
from shardsched.store.keys import GlobalKeys, ShardKeys
from shardsched.store.lua import signature

#: The letters lib/dag.lua reads: a task's trigger rule ('g:<task>') and a DAG's
#: catch-up when max_active_runs is full ('cu').
RULE_CODE = {
    TriggerRule.ALL_SUCCESS: "s",
    TriggerRule.ALL_DONE: "d",
    TriggerRule.ONE_FAILED: "o",
    TriggerRule.NONE_FAILED: "n",
}
CATCHUP_CODE = {Catchup.ALL: "a", Catchup.LATEST: "l", Catchup.NONE: "n"}


def task_item(
    name: str,
    depends_on: Sequence[str],
    downstream: Sequence[str],
    rule: TriggerRule,
    task_json: bytes,
    lease_ms: int,
    queue: str,
) -> tuple[Any, ...]:
    """One task's item for register_dag and update_dag (7 fields; ``queue`` as stored,
    core/queues.py)."""
    return (
        name,
        ",".join(dict.fromkeys(depends_on)),
        ",".join(downstream),
        RULE_CODE[rule],
        task_json,
        lease_ms,
        queue,
    )


REGISTER_DAG = signature(
    "register_dag",
    keys=("timer", "jobs", "dags"),
    argv=(
        "base",
        "wake channel",
        "shard",
        "dag id",
        "spec",
        "timing",
        "first fire",
        "max active runs",
        "stall sla",
        "catch-up",
        "task names",
        "roots",
        "actor",
    ),
    item=("name", "dependencies", "downstream", "trigger rule", "task spec", "lease", "queue"),
)


def register_dag(
    sk: ShardKeys,
    g: GlobalKeys,
    dag_id: str,
    *,
    spec_json: bytes,
    timing_json: bytes,
    first_ms: int | None,
    max_active_runs: int,
    stall_sla_ms: int,
    catchup: Catchup,
    order: str,
    roots: str,
    task_items: Sequence[Any],
    actor: str,
) -> Call:
    """Register a DAG and its tasks; reply {now_ms, 1 | -1 (the id is taken)}."""
    return REGISTER_DAG.call(
        (sk.timer, sk.jobs, sk.dags),
        (
            sk.base,
            g.wake_channel,
            sk.shard,
            dag_id,
            spec_json,
            timing_json,
            "" if first_ms is None else first_ms,
            max_active_runs,
            stall_sla_ms,
            CATCHUP_CODE[catchup],
            order,
            roots,
            actor,
        ),
        task_items,
    )


def decode_registered_dag(reply: Sequence[Any]) -> bool:
    """Whether register_dag registered it (False: the id is taken)."""
    return int(reply[1]) == 1


UPDATE_DAG = signature(
    "update_dag",
    keys=("dag", "timer", "segs", "versions", "changes"),
    argv=(
        "base",
        "dag id",
        "version",
        "spec",
        "timing",
        "next fire",
        "roll",
        "max active runs",
        "stall sla",
        "catch-up",
        "task names",
        "roots",
        "actor",
        "wake channel",
        "shard",
    ),
    item=("name", "dependencies", "downstream", "trigger rule", "task spec", "lease", "queue"),
)


def update_dag(
    sk: ShardKeys,
    g: GlobalKeys,
    dag_id: str,
    *,
    version: int,
    spec_json: bytes,
    timing_json: bytes,
    next_fire: int | str,
    roll: bool,
    max_active_runs: int,
    stall_sla_ms: int,
    catchup: Catchup,
    order: str,
    roots: str,
    task_items: Sequence[Any],
    actor: str,
) -> Call:
    """Replace a DAG's definition as version+1 (open DAG runs keep theirs); reply
    {1, version, now_ms} | {-1} | {-2} deleted | {-3} version moved on. ``next_fire``:
    ms, '' none, '=' keep."""
    return UPDATE_DAG.call(
        (sk.job(dag_id), sk.timer, sk.segments(dag_id), sk.versions(dag_id), sk.changes(dag_id)),
        (
            sk.base,
            dag_id,
            version,
            spec_json,
            timing_json,
            next_fire,
            "1" if roll else "0",
            max_active_runs,
            stall_sla_ms,
            CATCHUP_CODE[catchup],
            order,
            roots,
            actor,
            g.wake_channel,
            sk.shard,
        ),
        task_items,
    )


class AddTask(enum.IntEnum):
    ADDED = 1
    NO_SUCH_DAG = -1
    DELETED = -2
    VERSION_MOVED = -3
    NAME_TAKEN = -4
    BAD_DEPENDENCY = -5  #: with the 1-based index of the dependency


ADD_DAG_TASK = signature(
    "add_dag_task",
    keys=("dag", "task", "versions", "changes"),
    argv=(
        "version",
        "task",
        "dependencies",
        "trigger rule",
        "task spec",
        "lease",
        "dag spec",
        "dag id",
        "actor",
        "queue",
    ),
)


def add_dag_task(
    sk: ShardKeys,
    dag_id: str,
    task_job_id: str,
    *,
    version: int,
    task: str,
    dependencies: str,
    rule: TriggerRule,
    task_json: bytes,
    lease_ms: int,
    dag_json: bytes,
    actor: str,
    queue: str = "",
) -> Call:
    """Add a task to a DAG if it is still at ``version``; reply {AddTask, ...}."""
    return ADD_DAG_TASK.call(
        (sk.job(dag_id), sk.job(task_job_id), sk.versions(dag_id), sk.changes(dag_id)),
        (
            version,
            task,
            dependencies,
            RULE_CODE[rule],
            task_json,
            lease_ms,
            dag_json,
            dag_id,
            actor,
            queue,
        ),
    )


class DagTrigger(enum.IntEnum):
    STARTED = 1
    QUEUED = 2  #: under max_active_runs
    NO_SUCH_DAG = -1
    DELETED = -2


TRIGGER_DAG = signature(
    "trigger_dag",
    keys=("dag", "ready"),
    argv=("base", "dag id", "actor", "args"),
)


def trigger_dag(sk: ShardKeys, dag_id: str, actor: str, args_json: bytes = b"") -> Call:
    """A manual DAG run now, its tasks given ``args_json``; reply {DagTrigger, dag_run_id,
    now_ms, queues} (the caller wakes a worker of each queue, store/ready.py)."""
    return TRIGGER_DAG.call((sk.job(dag_id), sk.ready), (sk.base, dag_id, actor, args_json))


DAG_STALLED = signature(
    "dag_stalled", keys=("dagwait", "epoch", "stats"), argv=("epoch", "base", "count")
)


def dag_stalled(sk: ShardKeys, epoch: int, count: int = 1000) -> Call:
    """Report DAG tasks unclaimed past their stall SLA (fenced); reply {1, n, dag ids…}
    or {-1} when the epoch is stale."""
    return DAG_STALLED.call((sk.dag_wait, sk.epoch, sk.stats), (epoch, sk.base, count))
