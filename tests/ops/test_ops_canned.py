"""The main operations driven with canned Redis replies, no server (as hypercorn tests
its protocol without sockets): what each asks Redis, and what it makes of each answer,
refusals and error replies included. The same operations run on a real Redis throughout
the rest of the suite; these pin their contract with the store."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from canned import DAG, DEP, JOB, NOW_MS, NOW_S, SPEC, TIME, Canned, in_turn, job_fields
from shardsched import ops
from shardsched.core.backfill import BackfillRequest
from shardsched.core.errors import (
    AlreadyRetried,
    DagNotFound,
    DagTaskJob,
    IdTaken,
    JobDeleted,
    JobNotFound,
    RedisUnavailable,
)
from shardsched.core.models import DagRunState, JobStatus
from shardsched.core.params import TriggerRequest
from shardsched.core.patches import JobPatch
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.runs import by_id as run_ops
from shardsched.store.calls import Call
from shardsched.store.records import JOB_FIELDS, RUN_FIELDS


def one_slot(call: Call) -> set[str]:
    """The hash tags of a script call's keys (one shard's slot: one tag)."""
    return {key.split("{", 1)[1].split("}", 1)[0] for key in call.keys}


def test_create_asks_the_server_clock_then_registers_in_one_script_call() -> None:
    canned = Canned(TIME=TIME, SMEMBERS=[], register_job=[1, 1])
    created = canned.drive(ops.create_job(DEP, SPEC))
    (register,) = canned.asked("register_job")
    assert canned.round_trips == 2
    assert one_slot(register) == {str(DEP.keys_for(created.job_id).shard)}
    assert created.job_id.startswith("job_")
    # the first fire comes from the server's clock, never the caller's
    assert created.next_run_at is not None
    assert NOW_MS < created.next_run_at.timestamp() * 1000 <= NOW_MS + 3_600_000


def test_create_of_a_taken_id_raises_id_taken() -> None:
    canned = Canned(TIME=TIME, SMEMBERS=[], register_job=[1, -1])
    with pytest.raises(IdTaken):
        canned.drive(ops.create_job(DEP, msgspec.structs.replace(SPEC, id="mine")))


def test_create_validates_before_it_asks_anything() -> None:
    canned = Canned()
    bad = msgspec.structs.replace(SPEC, command="a\x00b")
    with pytest.raises(msgspec.ValidationError):
        canned.drive(ops.create_job(DEP, bad))
    assert canned.calls == []


def test_patch_reads_the_job_writes_its_next_version_and_reads_it_back() -> None:
    versions = in_turn(job_fields(version=3), job_fields(status="paused", version=4))
    canned = Canned(HMGET=versions, ZSCORE=None, TIME=TIME, SMEMBERS=[], update_job=[1])
    job = canned.drive(ops.patch_job(DEP, JOB, JobPatch(status=JobStatus.PAUSED)))
    (update,) = canned.asked("update_job")
    assert job.status == JobStatus.PAUSED and job.version == 4
    assert JOB in update.args and "3" in [str(a) for a in update.args]  # the version read


def test_patch_retries_when_the_version_moved_meanwhile() -> None:
    reads = in_turn(job_fields(version=3), job_fields(version=4), job_fields("paused", 5))
    canned = Canned(HMGET=reads, ZSCORE=None, TIME=TIME, SMEMBERS=[], update_job=in_turn([-3], [1]))
    job = canned.drive(ops.patch_job(DEP, JOB, JobPatch(status=JobStatus.PAUSED)))
    assert job.version == 5 and len(canned.asked("update_job")) == 2


@pytest.mark.parametrize(
    ("fields", "error"),
    [([None] * len(JOB_FIELDS), JobNotFound), (job_fields("deleted"), JobDeleted)],
)
def test_patch_of_a_missing_or_deleted_job_is_refused_and_writes_nothing(fields, error) -> None:
    canned = Canned(HMGET=fields, ZSCORE=None)
    with pytest.raises(error):
        canned.drive(ops.patch_job(DEP, JOB, JobPatch(status=JobStatus.PAUSED)))
    assert not canned.asked("update_job")


def test_trigger_creates_a_run_and_wakes_a_worker() -> None:
    run_id = f"{JOB}:m{NOW_MS}:1"
    canned = Canned(
        HGET=None, trigger=[1, run_id.encode(), str(NOW_MS).encode(), b""], RPUSH=1, LTRIM=b"OK"
    )
    triggered = canned.drive(ops.trigger(DEP, JOB))
    assert triggered.run_id == run_id
    assert triggered.scheduled_for == datetime.fromtimestamp(NOW_S, UTC)
    (push,) = canned.asked("RPUSH")
    assert push.args[2:] == (DEP.keys_for(JOB).shard,)  # a token for the job's shard


def test_a_trigger_sends_its_args_and_key_and_a_repeat_wakes_nobody() -> None:
    first = f"{JOB}:t1:1"
    canned = Canned(
        # the job's DAG (none), then the first run's scheduled_for and args
        HGET=in_turn(None, str(NOW_MS - 5000).encode(), b'{"day":"mon"}'),
        trigger=[2, first.encode(), str(NOW_MS).encode()],
    )
    request = TriggerRequest(args={"day": "mon"}, idempotency_key="k-1")
    triggered = canned.drive(ops.trigger(DEP, JOB, "ci", request))
    assert triggered.repeated and triggered.run_id == first
    assert triggered.scheduled_for == datetime.fromtimestamp(NOW_S - 5, UTC)  # the first's
    (call,) = canned.asked("trigger")
    assert call.args[-3:] == (b'{"day":"mon"}', "k-1", 24 * 3600 * 1000)
    assert not canned.asked("RPUSH"), "nothing new to run"


@pytest.mark.parametrize(("code", "error"), [(-1, JobNotFound), (-2, JobDeleted)])
def test_trigger_refused_by_the_script_wakes_nobody(code: int, error: type) -> None:
    canned = Canned(HGET=None, trigger=[code])
    with pytest.raises(error):
        canned.drive(ops.trigger(DEP, JOB))
    assert not canned.asked("RPUSH")


def test_trigger_of_a_dag_task_is_refused_before_the_script() -> None:
    canned = Canned(HGET=DAG.encode())
    with pytest.raises(DagTaskJob):
        canned.drive(ops.trigger(DEP, f"{DAG}.load"))
    assert not canned.asked("trigger")


def test_a_transient_error_reply_is_redis_unavailable_not_a_crash() -> None:
    oom = Exception("OOM command not allowed when used memory > 'maxmemory'.")
    canned = Canned(HGET=None, trigger=oom)
    with pytest.raises(RedisUnavailable):
        canned.drive(ops.trigger(DEP, JOB))


def test_backfill_sends_only_owed_ticks_and_counts_what_the_script_did() -> None:
    canned = Canned(
        HMGET=job_fields(), ZSCORE=None, HGET=None, backfill=[1, 2, 1, 2, b""], RPUSH=1, LTRIM=b"OK"
    )
    start = datetime.fromtimestamp(NOW_S - 3 * 3600, UTC)
    request = BackfillRequest(since=start, until=datetime.fromtimestamp(NOW_S, UTC))
    result = canned.drive(ops.backfill(DEP, JOB, request))
    (backfill,) = canned.asked("backfill")
    assert result.queued == 2 and result.started == 2
    assert result.already == 1 + result.ticks - 3
    assert one_slot(backfill) == {str(DEP.keys_for(JOB).shard)}
    assert canned.asked("RPUSH"), "started runs wake a worker"


def test_delete_deletes_once_and_answers_the_deleted_job() -> None:
    reads = in_turn(job_fields(), job_fields("deleted", 2))
    canned = Canned(HMGET=reads, ZSCORE=None, delete_job=[1])
    job = canned.drive(ops.delete_job(DEP, JOB))
    assert job.status == JobStatus.DELETED
    again = Canned(HMGET=job_fields("deleted", 2), ZSCORE=None)
    assert again.drive(ops.delete_job(DEP, JOB)).status == JobStatus.DELETED
    assert not again.asked("delete_job"), "a repeated DELETE writes nothing"


def test_retry_of_a_dead_letter_answers_its_next_attempt() -> None:
    rid, next_rid = f"{JOB}:{NOW_MS}:3", f"{JOB}:{NOW_MS}:4"
    run = {"st": b"scheduled", "c": str(NOW_MS).encode(), "s": str(NOW_MS).encode()}
    canned = Canned(
        retry_run=[1, next_rid.encode(), b""],
        RPUSH=1,
        LTRIM=b"OK",
        HMGET=[run.get(f) for f in RUN_FIELDS],
    )
    again = canned.drive(run_ops.retry_run(DEP, rid))
    assert again.run_id == next_rid and again.attempt == 4
    refused = Canned(retry_run=[2, next_rid.encode()])
    with pytest.raises(AlreadyRetried):
        refused.drive(run_ops.retry_run(DEP, rid))


def test_a_dag_trigger_starts_or_queues_and_only_a_start_wakes_a_worker() -> None:
    started = Canned(trigger_dag=[1, f"{DAG}:t1".encode(), str(NOW_MS).encode(), b""], RPUSH=1,
                     LTRIM=b"OK")  # fmt: skip
    assert started.drive(dag_ops.trigger_dag(DEP, DAG)).state == DagRunState.RUNNING
    assert started.asked("RPUSH")
    queued = Canned(trigger_dag=[2, f"{DAG}:t2".encode(), str(NOW_MS).encode(), b""])
    assert queued.drive(dag_ops.trigger_dag(DEP, DAG)).state == DagRunState.QUEUED
    with pytest.raises(DagNotFound):
        Canned().drive(dag_ops.trigger_dag(DEP, "job_not_a_dag"))
    with pytest.raises(DagNotFound):
        Canned(trigger_dag=[-1]).drive(dag_ops.trigger_dag(DEP, DAG))
