"""More operations on canned replies (tests/canned.py), no server: reads, calendars,
channels, tokens, concurrency keys, DAG reads and status, control. Each pins what the
operation asks Redis and what it makes of each answer, refusals included."""

from __future__ import annotations

import msgspec
import pytest

from canned import DAG, DEP, JOB, NOW_MS, NOW_S, TIME, Canned, in_turn, job_fields
from shardsched import ops
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.calendars import Calendar
from shardsched.core.concurrency import LimitRequest, RateLimit
from shardsched.core.errors import (
    ConflictError,
    DagNotFound,
    JobNotFound,
    NotFoundError,
    RedisUnavailable,
    RunNotFound,
)
from shardsched.core.models import JobStatus, RunState
from shardsched.core.notify import Channel
from shardsched.ops.access import tokens
from shardsched.ops.dags import manage as dag_ops
from shardsched.ops.deployment import concurrency
from shardsched.ops.notify import manage
from shardsched.ops.runs import by_id, control
from shardsched.ops.schedules import calendars
from shardsched.store.calendars import CALENDARS_CHANGED
from shardsched.store.records import DAG_FIELDS, RUN_FIELDS

RID = f"{JOB}:{NOW_MS}:1"


def run_fields(**values: bytes) -> list[bytes | None]:
    """A run hash as HMGET answers it (store/records.RUN_FIELDS), by stored letter."""
    return [values.get(letter) for letter in RUN_FIELDS]


# --- runs --------------------------------------------------------------------------------


def test_get_run_reads_one_record_and_names_its_parts_from_the_id() -> None:
    fields = run_fields(st=b"failed", c=str(NOW_MS).encode(), x=b"3", r=b"exit 3", w=b"w1")
    canned = Canned(HMGET=fields)
    run = canned.drive(by_id.get_run(DEP, RID))
    assert canned.round_trips == 1
    assert (run.job_id, run.attempt, run.state, run.exit_code) == (JOB, 1, RunState.FAILED, 3)
    assert run.lease_expires_at is None  # a lease means something only while it is held
    (hmget,) = canned.asked("HMGET")
    assert hmget.args[1] == DEP.keys_for(RID).run(RID)


def test_a_run_in_neither_redis_nor_an_archive_is_not_found() -> None:
    canned = Canned(HMGET=run_fields(), HGET=None)  # no record; no archive configured
    with pytest.raises(RunNotFound):
        canned.drive(by_id.get_run(DEP, RID))
    (meta,) = canned.asked("HGET")
    assert meta.args[1:] == (DEP.globals.meta, "archive")


def test_get_output_says_when_a_quota_cut_it() -> None:
    canned = Canned(HMGET=[b"running", b"9000", b"job"], GET=b"tail")
    out = canned.drive(by_id.get_output(DEP, RID))
    assert (out.output, out.total_bytes, out.truncated, out.quota) == ("tail", 9000, True, "job")
    gone = Canned(HMGET=[None, None, None], GET=None, HGET=None)
    with pytest.raises(RunNotFound):
        gone.drive(by_id.get_output(DEP, RID))


def test_cancel_run_asks_its_script_then_reads_the_run_back() -> None:
    canned = Canned(
        cancel_run=[1, RID.encode(), b"running", b"", 0],  # no queue got runs
        HMGET=run_fields(st=b"cancelled", c=str(NOW_MS).encode(), cb=b"ops"),
    )
    run = canned.drive(control.cancel_run(DEP, RID, "ops", "wrong day"))
    (call,) = canned.asked("cancel_run")
    assert RID in call.args and "ops" in call.args and "wrong day" in call.args
    assert run.state == RunState.CANCELLED and run.cancelled_by == "ops"


# --- jobs and DAGs -------------------------------------------------------------------


def test_get_job_of_a_dag_task_reads_its_dags_timing_and_status() -> None:
    timing = b'{"schedule":{"type":"interval","every_s":60.0}}'
    task = b'{"name":"load","command":"true"}'
    fields = job_fields(dag=DAG)
    fields[0] = task
    canned = Canned(HMGET=in_turn(fields, [timing, b"paused"]), ZSCORE=in_turn(None, None))
    job = canned.drive(ops.get_job(DEP, f"{DAG}.load"))
    assert job.dag_id == DAG and job.status == JobStatus.PAUSED
    assert job.schedule.every_s == 60.0  # the DAG's, not the task's


def test_get_job_of_a_dag_id_is_not_found_before_any_field_is_read() -> None:
    canned = Canned(HMGET=job_fields(), ZSCORE=None)
    with pytest.raises(JobNotFound):
        canned.drive(ops.get_job(DEP, DAG))


def dag_fields(status: bytes = b"active", kind: bytes = b"dag") -> list[bytes | None]:
    spec = (
        b'{"name":"etl","schedule":{"type":"interval","every_s":60},'
        b'"tasks":[{"name":"a","command":"true"}]}'
    )
    values = {"kind": kind, "spec": spec, "status": status, "created": b"1", "updated": b"2",
              "version": b"3", "stalled": b"1"}  # fmt: skip
    return [values.get(f) for f in DAG_FIELDS]


def test_get_dag_adds_the_counted_runs_to_the_hash_and_queue() -> None:
    canned = Canned(HMGET=dag_fields(), ZSCORE=str(NOW_MS).encode(), ZCARD=2, HGET=b"1")
    dag = canned.drive(dag_ops.get_dag(DEP, DAG))
    assert (dag.version, dag.queued_runs, dag.active_runs, dag.stalled_tasks) == (3, 2, 1, 1)
    assert dag.task_job_ids == {"a": f"{DAG}.a"}
    assert canned.round_trips == 1
    with pytest.raises(DagNotFound):
        Canned(HMGET=dag_fields(kind=b"job"), ZSCORE=None, ZCARD=0, HGET=None).drive(
            dag_ops.get_dag(DEP, DAG)
        )
    with pytest.raises(DagNotFound):
        Canned().drive(dag_ops.get_dag(DEP, JOB))  # not a DAG's id: nothing is asked


# --- calendars and channels -----------------------------------------------------------


def test_a_calendar_change_bumps_the_version_and_tells_every_node() -> None:
    canned = Canned(HSET=1, INCR=7, PUBLISH=2)
    view, created = canned.drive(
        calendars.put_calendar(DEP, "holidays", Calendar(dates=["2026-12-25"]))
    )
    assert created and view.name == "holidays"
    (publish,) = canned.asked("PUBLISH")
    assert publish.args[1:] == (DEP.globals.wake_channel, CALENDARS_CHANGED)
    assert canned.round_trips == 1  # the write, the version and the message together
    with pytest.raises(NotFoundError):
        Canned(HDEL=0, INCR=8, PUBLISH=2).drive(calendars.delete_calendar(DEP, "nope"))


def test_a_calendar_a_later_version_wrote_is_passed_over_in_the_list() -> None:
    good = msgspec.json.encode(Calendar(dates=["2026-12-25"]))
    canned = Canned(HGETALL=[b"b", good, b"a", b'{"dates": 5}', b"c", good])
    listed = canned.drive(calendars.list_calendars(DEP))
    assert [c.name for c in listed.calendars] == ["b", "c"]


def test_a_channel_a_rule_sends_to_cannot_be_deleted() -> None:
    rule = b'{"events":["failed"],"channels":["ops"]}'
    canned = Canned(HGETALL=[b"r1", rule], HEXISTS=1)
    with pytest.raises(ConflictError, match="r1"):
        canned.drive(manage.delete_channel(DEP, "ops"))
    assert not canned.asked("HDEL")
    free = Canned(HGETALL=[], HEXISTS=1, HDEL=1)
    free.drive(manage.delete_channel(DEP, "ops"))
    assert free.asked("HDEL")
    with pytest.raises(NotFoundError):
        Canned(HGETALL=[], HEXISTS=0).drive(manage.delete_channel(DEP, "ops"))


def test_put_channel_checks_the_address_before_writing() -> None:
    canned = Canned()
    with pytest.raises(Exception, match=r"(?i)url|address|scheme"):
        canned.drive(manage.put_channel(DEP, "x", Channel(kind="webhook", url="file:///etc")))
    assert canned.calls == []


# --- tokens ------------------------------------------------------------------------------


def test_a_token_is_stored_by_its_hash_and_its_secret_shown_once() -> None:
    canned = Canned(create_token=[1, NOW_MS])
    made = canned.drive(
        tokens.create_token(DEP, TokenRequest(name="ci", scopes=[Scope.READ]), "me")
    )
    (call,) = canned.asked("create_token")
    assert made.token and made.token not in " ".join(str(a) for a in call.args)
    assert made.name == "ci" and made.created_by == "me"
    with pytest.raises(ConflictError):
        Canned(create_token=[-1]).drive(
            tokens.create_token(DEP, TokenRequest(name="ci", scopes=[Scope.READ]), "me")
        )


def test_revoking_an_unknown_token_is_not_found() -> None:
    with pytest.raises(NotFoundError):
        Canned(revoke_token=0).drive(tokens.revoke_token(DEP, "ghost", "me"))
    assert Canned(revoke_token=1).drive(tokens.revoke_token(DEP, "ci", "me")) == {"revoked": "ci"}


# --- concurrency keys ----------------------------------------------------------------


def key_reads(limit: bytes | None = b"2") -> dict:
    return {
        "TIME": TIME,
        "HMGET": [limit, b"10", b"60000"],
        "HGET": b"5",
        "ZCARD": in_turn(1, 3),
        "ZRANGE": lambda call: (
            [b"r", str((NOW_MS - 4000) * 1000).encode()]  # the oldest waiting, with its score
            if "WITHSCORES" in call.args
            else [b"job_h:1:1"]
            if str(call.args[1]).endswith("h")
            else [b"job_w:1:1", b"job_w:2:1"]
        ),
        "LRANGE": [],
    }


def test_a_key_view_reads_limits_holders_and_the_oldest_wait_in_one_round() -> None:
    canned = Canned(**key_reads())
    view = canned.drive(concurrency.get_key(DEP, "db"))
    assert canned.round_trips == 1
    assert (view.limit, view.job_limit, view.running, view.waiting) == (2, 5, 1, 3)
    assert view.rate == RateLimit(max=10, per_s=60.0)
    assert view.oldest_wait_s == 4.0
    # which runs: the holders' ZSET and the waiting ZSET in order, in the same round
    assert view.holding_runs == ["job_h:1:1"] and view.waiting_runs == ["job_w:1:1", "job_w:2:1"]
    ranges = [c.args[1] for c in canned.asked("ZRANGE") if "WITHSCORES" not in c.args]
    assert ranges == [DEP.concurrency("db").holders, DEP.concurrency("db").waiting]


def test_setting_limits_lists_the_key_then_hands_out_turns() -> None:
    canned = Canned(SADD=1, ck_set=[1], **key_reads())
    view = canned.drive(concurrency.set_limits(DEP, "db", LimitRequest(limit=2), "me"))
    (call,) = canned.asked("ck_set")
    assert view.limit == 2 and call.keys and len({k.split("}")[0] for k in call.keys}) == 1
    with pytest.raises(NotFoundError):
        Canned(SISMEMBER=0).drive(concurrency.clear_limits(DEP, "db", "me"))


def test_an_error_reply_mid_operation_is_redis_unavailable() -> None:
    canned = Canned(HSET=Exception("LOADING Redis is loading the dataset in memory"))
    with pytest.raises(RedisUnavailable):
        canned.drive(manage.put_channel(DEP, "ops", Channel(kind="webhook", url="https://h/x")))


def test_the_servers_clock_is_the_only_clock_a_key_view_uses() -> None:
    later = [str(NOW_S + 10).encode(), b"0"]
    canned = Canned(**{**key_reads(), "TIME": later})
    assert canned.drive(concurrency.get_key(DEP, "db")).oldest_wait_s == 14.0


# --- more: rules, lists, restore, a DAG's status ------------------------------------


def test_a_rule_naming_a_missing_channel_is_refused_before_it_is_written() -> None:
    from shardsched.core.errors import ValidationError
    from shardsched.core.notify import Rule

    rule = Rule(events=["failed"], channels=["ops", "gone"])
    canned = Canned(HMGET=[b"{}", None])
    with pytest.raises(ValidationError, match="gone"):
        canned.drive(manage.put_rule(DEP, rule))
    assert not canned.asked("HSET")
    kept = Canned(HMGET=[b"{}", b"{}"], HSET=1)
    view, created = kept.drive(manage.put_rule(DEP, rule))
    assert created and view.id.startswith("nr_")
    with pytest.raises(NotFoundError):
        Canned(HDEL=0).drive(manage.delete_rule(DEP, "nr_nothere"))


def test_lists_read_one_hash_and_leave_secrets_out() -> None:
    record = b'{"name":"ci","scopes":["read"],"prefixes":[],"created_at":5,"created_by":"me"}'
    listed = Canned(HGETALL=[b"n:ci", b"abc", b"h:abc", record]).drive(tokens.list_tokens(DEP))
    assert [t.name for t in listed.tokens] == ["ci"]
    assert "abc" not in msgspec.json.encode(listed).decode()  # never the hash
    channel = msgspec.json.encode(Channel(kind="webhook", url="https://h.example/x"))
    chans = Canned(HGETALL=[b"b", channel, b"a", channel]).drive(manage.list_channels(DEP))
    assert [c.name for c in chans.channels] == ["a", "b"]
    one = Canned(HGET=msgspec.json.encode(Calendar(dates=["2026-12-25"])))
    assert one.drive(calendars.get_calendar(DEP, "h")).name == "h"
    with pytest.raises(NotFoundError):
        Canned(HGET=None).drive(calendars.get_calendar(DEP, "h"))


def test_the_key_list_reads_every_key_in_one_more_round() -> None:
    reads = key_reads()
    reads["ZCARD"] = in_turn(1, 3, 0, 0)
    reads["HMGET"] = in_turn([b"2", b"10", b"60000"], [None, None, None])
    reads["HGET"] = in_turn(b"5", None)
    reads["ZRANGE"] = in_turn([b"r", str((NOW_MS - 4000) * 1000).encode()], [])
    reads["LRANGE"] = in_turn([], [])
    canned = Canned(SMEMBERS=in_turn([b"db"], [b"api", b"db"]), **reads)
    listed = canned.drive(concurrency.list_keys(DEP))
    assert [k.key for k in listed.keys] == ["api", "db"]
    assert canned.round_trips == 2


def test_only_a_deleted_job_is_restored() -> None:
    with pytest.raises(ConflictError, match="only a deleted job"):
        Canned(HMGET=job_fields(), ZSCORE=None).drive(ops.restore_job(DEP, JOB))


def test_pausing_a_paused_dag_writes_nothing_and_a_resume_plans_from_the_server_clock() -> None:
    paused = Canned(HMGET=dag_fields(status=b"paused"), ZSCORE=None, ZCARD=0, HGET=None)
    dag = paused.drive(dag_ops.set_dag_status(DEP, DAG, JobStatus.PAUSED))
    assert dag.status == JobStatus.PAUSED and not paused.asked("update_job")
    resumed = Canned(
        HMGET=in_turn(dag_fields(status=b"paused"), dag_fields()),
        ZSCORE=in_turn(None, str(NOW_MS + 60_000).encode()),
        ZCARD=0,
        HGET=in_turn(None, b"{}", b"{}", None),
        TIME=TIME,
        update_job=[1],
    )
    dag = resumed.drive(dag_ops.set_dag_status(DEP, DAG, JobStatus.ACTIVE))
    (update,) = resumed.asked("update_job")
    fire = [a for a in update.args if isinstance(a, int) and a > NOW_MS - 1]
    assert fire and NOW_MS < fire[0] <= NOW_MS + 60_000  # the next tick after the server's now
    assert dag.status == JobStatus.ACTIVE
