"""DAGs and jobs as defined, named and run, on canned replies (tests/canned.py), no
server: a DAG registered, restored, deleted, joined by a job, and one of its runs read
and cancelled; jobs registered in bulk, found and created by name, and put
declaratively. Each pins what the operation asks Redis (keys, slots, script
arguments, round trips) and what it makes of each answer, refusals included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from canned import DAG, DEP, JOB, NOW_MS, SPEC, TIME, Canned, in_turn, job_fields
from shardsched.core.calendars import CalendarRule
from shardsched.core.errors import (
    ConflictError,
    DagNotFound,
    DagRunNotFound,
    IdTaken,
    NameTaken,
    PreconditionFailed,
    ValidationError,
)
from shardsched.core.instants import from_ms
from shardsched.core.models import (
    DagRunState,
    DagSpec,
    IntervalSchedule,
    JobStatus,
    RunState,
    TaskSpec,
    TaskState,
)
from shardsched.ops.dags import dag_runs
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.jobs import declare, define, names
from shardsched.ops.runs import control
from shardsched.store.calls import Call
from shardsched.store.records import DAG_FIELDS, RUN_FIELDS

G = DEP.globals
TASKS = [TaskSpec(name="extract", command="true"),
         TaskSpec(name="load", command="true", depends_on=["extract"])]  # fmt: skip
ETL = DagSpec(name="etl", schedule=IntervalSchedule(every_s=3600), tasks=TASKS)


def run_fields(**values: bytes) -> list[bytes | None]:
    """A run hash as HMGET answers it (store/records.RUN_FIELDS), by stored letter."""
    return [values.get(letter) for letter in RUN_FIELDS]


def by_run(records: dict[str, list[bytes | None]]) -> Callable[[Call], Any]:
    """HMGET of run records answered by run id (none: no record)."""
    return lambda call: records.get(call.args[1].split("}:run:", 1)[1], run_fields())


def dag_fields(status: bytes = b"active", version: bytes = b"3") -> list[bytes | None]:
    """A DAG's hash as HMGET answers it (store/records.DAG_FIELDS): one task, a."""
    spec = b'{"name":"etl","schedule":{"type":"interval","every_s":60},"tasks":[{"name":"a","command":"true"}]}'  # noqa: E501
    values = {"kind": b"dag", "spec": spec, "status": status, "created": b"1", "updated": b"2",
              "version": version, "inc": b"2"}  # fmt: skip
    return [values.get(f) for f in DAG_FIELDS]


def dag_reads(*fields: list[bytes | None], **more: Any) -> dict[str, Any]:
    """get_dag's reads, once per DAG hash given (HGET: its counted runs, then ``more``'s)."""
    return {"HMGET": in_turn(*fields), "ZSCORE": str(NOW_MS + 60_000).encode(), "ZCARD": 0,
            "HGET": None} | more  # fmt: skip


# --- DAGs ---------------------------------------------------------------------------------


def test_create_dag_registers_the_dag_and_its_tasks_in_one_script_call() -> None:
    canned = Canned(TIME=TIME, SMEMBERS=[], register_dag=[NOW_MS, 1])
    made = canned.drive(dag_ops.create_dag(DEP, msgspec.structs.replace(ETL, id="etl"), "ops"))
    (reg,) = canned.asked("register_dag")
    assert made.dag_id == "dag_etl" and canned.round_trips == 2
    assert made.task_job_ids == {"extract": "dag_etl.extract", "load": "dag_etl.load"}
    assert len({key.split("}")[0] for key in reg.keys}) == 1  # one shard's slot
    first, order, roots, actor = reg.args[6], *reg.args[10:13]
    assert (order, roots, actor) == ("extract,load", "extract", "ops")
    assert NOW_MS < first <= NOW_MS + 3_600_000 and made.next_run_at == from_ms(first)
    items = reg.args[13:]  # 7 fields a task: name, dependencies, downstream, rule, ...
    assert (items[:4], items[7:11]) == (("extract", "", "load", "s"), ("load", "extract", "", "s"))
    with pytest.raises(IdTaken):
        Canned(TIME=TIME, SMEMBERS=[], register_dag=[NOW_MS, -1]).drive(
            dag_ops.create_dag(DEP, ETL)
        )


def test_an_invalid_dag_is_refused_before_anything_is_asked() -> None:
    loop = [TaskSpec(name="a", command="true", depends_on=["b"]),
            TaskSpec(name="b", command="true", depends_on=["a"])]  # fmt: skip
    canned = Canned()
    with pytest.raises(ValidationError):
        canned.drive(dag_ops.create_dag(DEP, msgspec.structs.replace(ETL, tasks=loop)))
    assert canned.calls == []


def test_restoring_a_deleted_dag_writes_its_next_incarnation_from_the_servers_clock() -> None:
    reads = dag_reads(dag_fields(b"deleted"), dag_fields(version=b"4"),
                      HGET=in_turn(None, b"{}", b"{}", None))  # fmt: skip
    canned = Canned(TIME=TIME, SMEMBERS=[], update_job=[1], **reads)
    dag = canned.drive(dag_ops.restore_dag(DEP, DAG, "ops"))
    (update,) = canned.asked("update_job")
    assert update.args[:2] == (DAG, 3) and update.args[4] == "active"
    assert NOW_MS < update.args[5] <= NOW_MS + 60_000  # its next tick after the server's now
    assert update.args[13:16] == ("ops", "recreate", "incarnation 3") and update.args[19] == "1"
    assert (dag.status, dag.version) == (JobStatus.ACTIVE, 4)
    with pytest.raises(ConflictError, match="only a deleted one"):
        Canned(**dag_reads(dag_fields())).drive(dag_ops.restore_dag(DEP, DAG))


def test_deleting_a_dag_calls_its_script_once_and_reads_it_back() -> None:
    canned = Canned(delete_job=[1, NOW_MS], **dag_reads(dag_fields(), dag_fields(b"deleted")))
    dag = canned.drive(dag_ops.delete_dag(DEP, DAG, "ops"))
    (delete,) = canned.asked("delete_job")
    sk = DEP.keys_for(DAG)
    assert delete.keys[0] == sk.job(DAG) and delete.args == (
        DAG,
        G.wake_channel,
        sk.shard,
        "ops",
        "",
    )
    assert dag.status == JobStatus.DELETED
    again = Canned(**dag_reads(dag_fields(b"deleted")))
    assert again.drive(dag_ops.delete_dag(DEP, DAG)).status == JobStatus.DELETED
    assert not again.asked("delete_job"), "a repeated DELETE writes nothing"
    with pytest.raises(DagNotFound):
        Canned(delete_job=[-1], **dag_reads(dag_fields())).drive(dag_ops.delete_dag(DEP, DAG))


REPORT = msgspec.structs.replace(SPEC, name="report", schedule=None, depends_on=[f"{DAG}.a"])


def test_a_job_with_depends_on_joins_its_dependencies_dag_at_its_version() -> None:
    spec = dag_fields()[1]
    canned = Canned(add_dag_task=[1], **dag_reads(dag_fields(), HGET=in_turn(None, spec)))
    made = canned.drive(dag_ops.join_dag(DEP, REPORT, "ops"))
    assert (made.job_id, made.next_run_at) == (f"{DAG}.report", from_ms(NOW_MS + 60_000))
    (add,) = canned.asked("add_dag_task")
    sk = DEP.keys_for(DAG)
    assert add.keys[:2] == (sk.job(DAG), sk.job(f"{DAG}.report"))
    assert add.args[:4] == (3, "report", "a", "s") and add.args[7:9] == (DAG, "ops")
    assert [t["name"] for t in msgspec.json.decode(add.args[6])["tasks"]] == ["a", "report"]


def test_joining_a_dag_is_refused_for_a_missing_task_and_retried_when_it_moved() -> None:
    spec = dag_fields()[1]
    with pytest.raises(ValidationError, match="no task 'zz'"):
        bad = msgspec.structs.replace(REPORT, depends_on=[f"{DAG}.zz"])
        Canned(**dag_reads(dag_fields())).drive(dag_ops.join_dag(DEP, bad))
    with pytest.raises(ValidationError, match="same DAG"):
        two = msgspec.structs.replace(REPORT, depends_on=[f"{DAG}.a", "dag_other.b"])
        Canned().drive(dag_ops.join_dag(DEP, two))
    twice = dag_reads(dag_fields(), dag_fields(), HGET=in_turn(None, spec, None, spec))
    moved = Canned(add_dag_task=in_turn([-3], [1]), **twice)
    assert moved.drive(dag_ops.join_dag(DEP, REPORT)).job_id == f"{DAG}.report"
    assert len(moved.asked("add_dag_task")) == 2, "the DAG changed meanwhile: read again"
    with pytest.raises(ValidationError, match="already has a task"):
        Canned(add_dag_task=[-4], **dag_reads(dag_fields(), HGET=in_turn(None, spec))).drive(
            dag_ops.join_dag(DEP, REPORT)
        )


# --- a DAG run, read and cancelled -------------------------------------------------------

DRID = f"{DAG}:{NOW_MS}"
EXTRACT = f"{DAG}.extract:{NOW_MS}:2"  # its second attempt


def dag_run_hash(state: bytes = b"running") -> list[bytes]:
    """A DAG run's hash as HGETALL answers it (lua/lib/dag.lua): extract released (its
    latest attempt's run says how it is), load waiting on it."""
    fields = {
        b"s": NOW_MS,
        b"st": state,
        b"c": NOW_MS,
        b"m": b"1",
        b"t:extract": b"r",
        b"r:extract": EXTRACT.encode(),
        b"a:extract": NOW_MS + 5,
        b"t:load": b"w",
    }
    return [v if isinstance(v, bytes) else str(v).encode() for kv in fields.items() for v in kv]


RUNS = {
    f"{DAG}.extract:{NOW_MS}:1": run_fields(st=b"failed", c=str(NOW_MS).encode(), x=b"1"),
    EXTRACT: run_fields(st=b"running", c=str(NOW_MS + 60_000).encode(), w=b"w-1"),
}


def test_a_dag_run_reads_its_hash_its_dags_task_order_and_every_attempt() -> None:
    canned = Canned(HGETALL=dag_run_hash(), HGET=b"extract,load", HMGET=by_run(RUNS))
    run = canned.drive(dag_runs.get_dag_run(DEP, DRID))
    assert canned.round_trips == 3
    assert canned.asked("HGETALL")[0].args == ("HGETALL", DEP.keys_for(DAG).dag_run(DRID))
    assert (run.state, run.manual, run.archived) == (DagRunState.RUNNING, True, False)
    extract, load = run.tasks
    assert (extract.state, extract.run_id, extract.released_at) == (
        TaskState.RUNNING,
        EXTRACT,
        from_ms(NOW_MS + 5),
    )
    assert [a.state for a in extract.attempts] == [RunState.FAILED, RunState.RUNNING]
    assert (load.state, load.run_id, load.attempts) == (TaskState.WAITING, None, [])


def test_a_dag_run_in_neither_redis_nor_an_archive_is_not_found() -> None:
    canned = Canned(HGETALL=[], HGET=None)
    with pytest.raises(DagRunNotFound):
        canned.drive(dag_runs.get_dag_run(DEP, DRID))
    assert canned.asked("HGET")[0].args == ("HGET", G.meta, "archive")
    with pytest.raises(DagRunNotFound):
        Canned().drive(dag_runs.get_dag_run(DEP, f"{JOB}:{NOW_MS}"))  # a job's id: not asked


def test_cancelling_a_dag_run_gives_a_waiting_tasks_key_place_back_then_reads_it() -> None:
    waiting = f"{DAG}.load:{NOW_MS}:1"
    reply = [
        1,
        b"running",
        0,
        EXTRACT.encode(),
        b"running",
        b"@db",
        waiting.encode(),
        b"waiting",
        b"@db",
    ]
    canned = Canned(
        cancel_dag_run=reply,
        ck_release=[],  # nobody next in line
        HGETALL=dag_run_hash(b"cancelled"),
        HGET=b"extract,load",
        HMGET=by_run(RUNS),
    )
    run = canned.drive(control.cancel_dag_run(DEP, DRID, "ops", "wrong day"))
    (cancel,) = canned.asked("cancel_dag_run")
    assert cancel.args == (DEP.keys_for(DAG).base, DRID, "ops", "wrong day")
    (release,) = canned.asked("ck_release")
    assert release.args[1:] == (waiting,), "a running one's worker gives its place back"
    assert run.state == DagRunState.CANCELLED and not canned.asked("RPUSH")


def test_a_cancel_that_started_a_queued_dag_run_wakes_a_worker_and_refusals_read_nothing() -> None:
    canned = Canned(
        cancel_dag_run=[1, b"running", b""],
        RPUSH=1,
        LTRIM=b"OK",
        HGETALL=dag_run_hash(b"cancelled"),
        HGET=b"extract,load",
        HMGET=by_run(RUNS),
    )
    canned.drive(control.cancel_dag_run(DEP, DRID))
    assert canned.asked("RPUSH")[0].args[2:] == (DEP.keys_for(DAG).shard,)
    for reply, error in (([-1], DagRunNotFound), ([-2, b"succeeded"], ConflictError)):
        refused = Canned(cancel_dag_run=reply)
        with pytest.raises(error):
            refused.drive(control.cancel_dag_run(DEP, DRID))
        assert len(refused.calls) == 1


# --- jobs: in bulk, by name, declared ------------------------------------------------------


def registered(*codes: int) -> Callable[[Call], list[int]]:
    """register_job's reply for a call, a code per job sent (10 items each), in turn."""
    left = list(codes)
    return lambda call: [NOW_MS, *(left.pop(0) for _ in range(len(call.args[4:]) // 10))]


def test_jobs_created_together_are_registered_one_script_call_a_shard_in_one_round() -> None:
    specs = [msgspec.structs.replace(SPEC, id="alpha"), msgspec.structs.replace(SPEC, id="beta")]
    canned = Canned(TIME=TIME, SMEMBERS=[], register_job=registered(1, 2))
    made = canned.drive(define.create_jobs(DEP, specs, actor="ops"))
    assert canned.round_trips == 2
    calls = canned.asked("register_job")
    assert sorted(c.args[2] for c in calls) == [DEP.keys_for("alpha").shard,
                                                DEP.keys_for("beta").shard]  # fmt: skip
    assert all(c.args[3] == "ops" and len(c.args[4:]) == 10 for c in calls)
    assert [(c.job_id, c.recreated) for c in made] == [("alpha", False), ("beta", True)]
    assert made[0].next_run_at is not None and made[0].next_run_at > from_ms(NOW_MS)
    with pytest.raises(IdTaken):
        Canned(TIME=TIME, SMEMBERS=[], register_job=registered(1, -1)).drive(
            define.create_jobs(DEP, specs)
        )


def test_a_job_naming_a_missing_calendar_is_refused_before_the_clock_is_read() -> None:
    spec = msgspec.structs.replace(SPEC, calendars=CalendarRule(include=["workdays"]))
    canned = Canned(HMGET=[None])
    with pytest.raises(ValidationError, match="workdays"):
        canned.drive(define.create_jobs(DEP, [spec]))
    assert canned.asked("HMGET")[0].args == ("HMGET", G.calendars.book, "workdays")
    assert not canned.asked("TIME") and not canned.asked("register_job")


def shard_of(call: Call) -> int:
    return int(call.args[1].split("{", 1)[1].split("}", 1)[0])


def test_the_ids_of_a_name_are_one_hget_a_shard_and_a_set_where_several_share_it() -> None:
    canned = Canned(HGET=lambda call: {2: b"job_a", 5: b"*"}.get(shard_of(call)),
                    SMEMBERS=[b"job_c", b"job_b"])  # fmt: skip
    assert canned.drive(names.job_ids_named(DEP, "hourly")) == ["job_a", "job_b", "job_c"]
    assert canned.round_trips == 2 and len(canned.asked("HGET")) == DEP.n_shards
    (members,) = canned.asked("SMEMBERS")
    assert members.args[1] == DEP.shard(5).named("hourly")


def named(name: str = "hourly", status: str = "active") -> list[Any]:
    fields = job_fields(status)
    fields[0] = msgspec.json.encode(msgspec.structs.replace(SPEC, name=name))
    return fields


def test_the_jobs_of_a_name_leave_out_the_deleted_and_the_renamed() -> None:
    jobs = {"job_a": named(), "job_b": named(status="deleted"), "job_c": named("other")}
    answers = {
        "HGET": lambda call: {2: b"*"}.get(shard_of(call)),
        "SMEMBERS": [b"job_a", b"job_b", b"job_c"],
        "HMGET": lambda call: jobs[call.args[1].split("}:job:")[1]],
        "ZSCORE": None,
    }
    assert [j.job_id for j in Canned(**answers).drive(names.jobs_named(DEP, "hourly"))] == ["job_a"]
    every = Canned(**answers).drive(names.jobs_named(DEP, "hourly", include_deleted=True))
    assert sorted(j.job_id for j in every) == ["job_a", "job_b"]


def test_a_unique_name_is_claimed_checked_then_let_go_whatever_happened() -> None:
    claim = DEP.keys_for("hourly").name_claim("hourly")
    busy = Canned(SET=None)
    with pytest.raises(NameTaken):
        busy.drive(names.create_named(DEP, SPEC))
    assert len(busy.calls) == 1, "another creation holds the name: nothing else is asked"
    taken = Canned(SET=b"OK", HGET=lambda c: b"job_a" if shard_of(c) == 2 else None,
                   HMGET=named(), ZSCORE=None, DEL=1)  # fmt: skip
    with pytest.raises(NameTaken, match="job_a"):
        taken.drive(names.create_named(DEP, SPEC))
    assert taken.asked("DEL")[0].args == ("DEL", claim)
    free = Canned(SET=b"OK", HGET=None, TIME=TIME, SMEMBERS=[], register_job=registered(1), DEL=1)
    made = free.drive(names.create_named(DEP, SPEC))
    assert free.asked("SET")[0].args[1:2] + free.asked("SET")[0].args[3:] == (claim, "NX", "PX",
                                                                             10_000)  # fmt: skip
    assert made.job_id.startswith("job_") and free.calls[-1].args == ("DEL", claim)


def test_putting_the_same_definition_again_writes_nothing() -> None:
    canned = Canned(HMGET=job_fields(version=3), ZSCORE=None)
    job, outcome = canned.drive(declare.put_job(DEP, JOB, SPEC))
    assert (outcome, job.version) == (declare.Outcome.UNCHANGED, 3)
    assert not canned.asked("TIME") and not canned.asked("update_job")


def test_putting_a_new_id_creates_it_and_if_match_on_a_missing_one_is_refused() -> None:
    canned = Canned(HMGET=in_turn([None] * 13, job_fields()), ZSCORE=None, TIME=TIME, SMEMBERS=[],
                    register_job=registered(1))  # fmt: skip
    job, outcome = canned.drive(declare.put_job(DEP, JOB, SPEC))
    assert outcome == declare.Outcome.CREATED and job.job_id == JOB
    assert canned.asked("register_job")[0].args[4] == JOB  # the id is the caller's
    refused = Canned(HMGET=[None] * 13, ZSCORE=None)
    with pytest.raises(PreconditionFailed):
        refused.drive(declare.put_job(DEP, JOB, SPEC, if_match=2))
    assert not refused.asked("register_job")
