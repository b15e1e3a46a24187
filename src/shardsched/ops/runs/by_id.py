"""Run operations by run id: read a run and its output, retry a dead-lettered one."""

from __future__ import annotations

from shardsched.core.access import SDK_ACTOR
from shardsched.core.errors import (
    RunNotFound,
)
from shardsched.core.views import (
    RunOutput,
)
from shardsched.ops.cold import archive_url, cold_run
from shardsched.ops.dags.repair import resume_dead_task
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import recovery
from shardsched.store.records import (
    OUTPUT_LIMIT,
    RUN_FIELDS,
    run_record,
    run_view,
)


def get_run(dep: Deployment, rid: str) -> Op:
    """A run, from Redis or else from the cold archive (``archived: true``)."""
    sk = dep.keys_for(rid)
    (fields,) = yield [Call(("HMGET", sk.run(rid), *RUN_FIELDS))]
    record = run_record(check(fields))
    if record is None:
        archived = cold_run(dep, (yield from archive_url(dep)), rid)
        if archived is None:
            raise RunNotFound(rid)
        return archived.run
    return run_view(rid, record)


def get_output(dep: Deployment, rid: str) -> Op:
    """The last 64 KiB a run printed, from Redis or else from the cold archive."""
    sk = dep.keys_for(rid)
    fields, out = yield [
        Call(("HMGET", sk.run(rid), "st", "ol", "oq")),
        Call(("GET", sk.output(rid))),
    ]
    state, total, cut_by = check(fields)
    data: bytes
    if state is not None:
        data = check(out) or b""
        printed = max(int(total or 0), len(data))
    else:
        archived = cold_run(dep, (yield from archive_url(dep)), rid)
        if archived is None:
            raise RunNotFound(rid)
        data, state, printed = archived.output, archived.run.state.encode(), len(archived.output)
    return RunOutput(
        run_id=rid,
        output=data.decode("utf-8", "replace"),
        truncated=printed > len(data) or len(data) >= OUTPUT_LIMIT or cut_by is not None,
        total_bytes=printed,
        state=state.decode(),
        quota=None if cut_by is None else cut_by.decode(),
    )


def retry_run(dep: Deployment, rid: str, actor: str = SDK_ACTOR) -> Op:
    """Send a dead-lettered run back as a new attempt; returns the new Run. A DAG task's
    run resumes its DAG run: the task and its downstream that did not succeed are
    cleared (ops/dags/repair.py)."""
    sk = dep.keys_for(rid)
    (reply,) = yield [recovery.retry_run(sk, rid, actor)]
    reply = check(reply)
    if int(reply[0]) == recovery.Retried.DAG_SETTLED:
        return (yield from get_run(dep, (yield from resume_dead_task(dep, rid, actor))))
    recovery.raise_retry_refusal(reply[0], rid, reply[1].decode() if len(reply) > 1 else None)
    yield ready.push(dep.globals, [sk.shard], ready.woken(reply[2]))
    return (yield from get_run(dep, reply[1].decode()))
