"""An operator's control over runs under way: cancel a run, or a whole DAG run.

The scripts (lua/cancel_run.lua, lua/cancel_dag_run.lua) end the records in one atomic
step each. What crosses hash slots comes after: a cancelled run that held or waited on a
concurrency key gives its place back (a running one's worker does that when it has
stopped the job), and the queues a cancel put runs on (a DAG's downstream tasks, a queued
DAG run starting) get a wake token.
"""

from __future__ import annotations

from collections.abc import Iterable

from shardsched.core.access import SDK_ACTOR
from shardsched.core.ids import parse_dag_run_id
from shardsched.core.queues import key_of
from shardsched.ops.dags.dag_runs import get_dag_run
from shardsched.ops.deployment.concurrency import release_runs
from shardsched.ops.runs.by_id import get_run
from shardsched.store import ready
from shardsched.store.calls import Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import control as lua

#: The states in which a cancelled run's place on its key is given back here: the run
#: will not start. A running one keeps it until its worker has stopped the job.
_NOT_STARTED = frozenset({"scheduled", "waiting", "retrying"})


def _places(runs: Iterable[lua.CancelledRun]) -> list[tuple[str, str]]:
    out = []
    for run in runs:
        key = key_of(run.stored_queue)
        if key is not None and run.was in _NOT_STARTED:
            out.append((key, run.run_id))
    return out


def cancel_run(dep: Deployment, rid: str, actor: str = SDK_ACTOR, why: str = "") -> Op:
    """Cancel a run (a failed attempt's id: its tick's latest attempt); returns the run,
    now ``cancelled``. A running one stops at its worker's next lease renewal."""
    sk = dep.keys_for(rid)
    (reply,) = yield [lua.cancel_run(sk, rid, actor, why)]
    run, queues = lua.decode_cancelled(check(reply), rid)
    yield from release_runs(dep, _places([run]))
    if queues:
        yield ready.push(dep.globals, [sk.shard], queues)
    return (yield from get_run(dep, run.run_id))


def cancel_dag_run(dep: Deployment, drid: str, actor: str = SDK_ACTOR, why: str = "") -> Op:
    """Cancel a DAG run and every task run of it not yet ended; returns the DAG run."""
    sk = dep.keys_for(parse_dag_run_id(drid)[0])
    (reply,) = yield [lua.cancel_dag_run(sk, drid, actor, why)]
    cancelled = lua.decode_dag_cancelled(check(reply), drid)
    yield from release_runs(dep, _places(cancelled.tasks))
    if cancelled.queues:
        yield ready.push(dep.globals, [sk.shard], cancelled.queues)
    return (yield from get_dag_run(dep, drid))
