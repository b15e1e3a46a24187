"""The typed records (store/records.py) read a hash by field name: what a Lua script or
HSET wrote, in any order and beside fields the record does not know, comes back under
its name; an empty field reads as absent; no hash reads as None."""

from __future__ import annotations

from shardsched.store.records import (
    DAG_FIELDS,
    JOB_FIELDS,
    RUN_FIELDS,
    dag_record,
    job_record,
    run_record,
    run_view,
)
from shardsched.store.redis import Redis


async def test_a_run_hash_reads_back_by_name(redis: Redis) -> None:
    key = "records-test:run"
    await redis.execute(
        "HSET", key, "zz", "unknown", "pl", "1500", "st", "retrying", "c", "1000",
        "x", "3", "r", "exit 3", "nx", "job_a:1000:2", "bf", "bf_1", "stl", "",
        "args", '{"n": 1}', "q", "",
    )  # fmt: skip
    rec = run_record(await redis.execute("HMGET", key, *RUN_FIELDS))
    assert rec is not None
    assert (rec.state, rec.created_ms, rec.planned_ms) == ("retrying", 1000, 1500)
    assert (rec.exit_code, rec.reason, rec.next_run_id) == (3, "exit 3", "job_a:1000:2")
    assert (rec.backfill, rec.stalled_ms, rec.queue, rec.worker) == ("bf_1", None, None, None)
    run = run_view("job_a:1000:1", rec)
    assert (run.job_id, run.attempt, run.args, run.queue) == ("job_a", 1, {"n": 1}, "default")
    assert run_record(await redis.execute("HMGET", "records-test:none", *RUN_FIELDS)) is None


async def test_a_job_and_a_dag_hash_read_back_by_name(redis: Redis) -> None:
    key = "records-test:job"
    await redis.execute(
        "HSET", key, "version", "7", "spec", '{"name": "x"}', "created", "10",
        "updated", "20", "status", "paused", "pr", "maintenance", "pu", "99", "fc", "4",
        "timing", "{}",
    )  # fmt: skip
    rec = job_record(await redis.execute("HMGET", key, *JOB_FIELDS))
    assert rec is not None
    assert (rec.version, rec.status, rec.pause_reason, rec.paused_until_ms) == (
        7, "paused", "maintenance", 99
    )  # fmt: skip
    assert (rec.fires, rec.dag_id, rec.incarnation) == (4, None, None)
    assert job_record(await redis.execute("HMGET", "records-test:none", *JOB_FIELDS)) is None
    dag = "records-test:dag"
    await redis.execute(
        "HSET", dag, "kind", "dag", "spec", "{}", "status", "active", "created", "1",
        "updated", "2", "version", "3", "stalled", "2",
    )  # fmt: skip
    drec = dag_record(await redis.execute("HMGET", dag, *DAG_FIELDS))
    assert drec is not None and (drec.version, drec.stalled, drec.active) == (3, 2, 0)
    assert dag_record(await redis.execute("HMGET", key, *DAG_FIELDS)) is None  # not a DAG
