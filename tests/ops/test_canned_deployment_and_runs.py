"""The deployment and what runs in it, on canned replies (tests/canned.py), no server:
the registries, every shard's lease and counters, the trigger lag, the queues and the
status screen; the event stream, what is under way across jobs, and many retries at
once. Each pins what the operation asks Redis (keys, shards, round trips) and what it
makes of each answer, refusals included."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from canned import DAG, DEP, JOB, NOW_MS, NOW_S, TIME, Canned, in_turn
from shardsched.core.errors import ValidationError
from shardsched.core.instants import from_ms
from shardsched.ops.deployment import cluster, lag_history, status
from shardsched.ops.pagination import Cursor
from shardsched.ops.runs import active, bulk_retry, events
from shardsched.store.calls import Call
from shardsched.store.records import RUN_FIELDS, NodeInfo, Supervised, WorkerInfo

G = DEP.globals
RID = f"{JOB}:{NOW_MS}:1"


def at(answers: dict[str, Any], default: Any = None) -> Callable[[Call], Any]:
    """An answer by the key a call names, as '<hash tag>/<key's name>' ('3/ready', 'g/lag')."""

    def answer(call: Call) -> Any:
        key = next(a for a in call.args[1:] if isinstance(a, str) and "{" in a)
        tag, _, name = key.partition("}:")
        return answers.get(f"{tag.rsplit('{', 1)[1]}/{name}", default)

    return answer


def run_fields(**values: bytes) -> list[bytes | None]:
    """A run hash as HMGET answers it (store/records.RUN_FIELDS), by stored letter."""
    return [values.get(letter) for letter in RUN_FIELDS]


def by_run(records: dict[str, list[bytes | None]]) -> Callable[[Call], Any]:
    """HMGET of run records answered by run id (none: no record)."""
    return lambda call: records.get(call.args[1].split("}:run:", 1)[1], run_fields())


# --- registries, leases, lag and queues ----------------------------------------------------


def registry(info: dict[bytes, bytes]) -> dict[str, Any]:
    """One registry as _live reads it: one live member, one lapsed, and their info."""
    members = [b"m-1", str(NOW_MS + 20_000).encode(), b"m-old", str(NOW_MS - 1).encode()]
    return {"TIME": TIME, "ZRANGE": members, "HGETALL": [p for kv in info.items() for p in kv]}


def test_the_worker_list_is_the_registrys_live_members_by_the_servers_clock() -> None:
    info = msgspec.json.encode(
        WorkerInfo(
            capacity=4, capacity_free=1, running=3, started_ms=1_700_000_000_000, queues=["gpu"]
        )
    )
    canned = Canned(**registry({b"m-1": info, b"m-old": info}))
    (w,) = canned.drive(cluster.list_workers(DEP)).workers
    assert canned.round_trips == 1
    assert canned.asked("ZRANGE")[0].args == ("ZRANGE", G.workers, 0, -1, "WITHSCORES")
    assert (w.worker_id, w.capacity, w.capacity_free, w.running, w.queues) == (
        "m-1",
        4,
        1,
        3,
        ["gpu"],
    )
    assert w.expires_at == from_ms(NOW_MS + 20_000) and w.started_at == from_ms(1_700_000_000_000)


def test_the_cluster_view_reads_every_shards_lease_and_counters_in_one_round() -> None:
    node = b'{"http":"h:1","shards":[0,1],"lag_p99_1m":0.02,"fired_1m":40}'
    leases = {"0/owner": b"m-1", "0/epoch": b"7", "1/owner": b"m-1", "1/epoch": b"2"}
    canned = Canned(
        **registry({b"m-1": node}),  # m-old published no info: it lapsed anyway
        GET=at(leases),
        PTTL=at({"0/owner": 5000, "1/owner": -1}, -2),
        HMGET=at({"0/stats": [b"2", None, b"1", b"3"]}, [None] * 4),
    )
    view = canned.drive(cluster.cluster_view(DEP))
    assert canned.round_trips == 2 and len(canned.asked("PTTL")) == DEP.n_shards
    (n1,) = view.nodes
    assert (n1.node_id, n1.http, n1.shards, n1.lag_p99_1m, n1.fired_1m) == (
        "m-1",
        "h:1",
        [0, 1],
        0.02,
        40,
    )
    s0, s1, s2 = view.shards[:3]
    assert (s0.owner, s0.epoch, s0.lease_expires_at) == ("m-1", 7, from_ms(NOW_MS + 5000))
    assert (s0.refused_fire, s0.refused_renew, s0.lease_reclaims, s0.dag_stalled) == (2, 0, 1, 3)
    assert (s1.owner, s1.lease_expires_at) == ("m-1", None)  # no expiry: no deadline shown
    assert (s2.owner, s2.epoch, s2.lease_expires_at) == (None, 0, None)
    assert view.now == datetime.fromtimestamp(NOW_S, UTC)


def test_lag_history_reads_the_last_hour_by_the_servers_clock() -> None:
    sample = [b"n", b"m-1", b"p50", b"0.004", b"p99", b"0.02", b"f", b"12"]
    quiet = [b"n", b"m-2", b"p50", b"", b"p99", b"", b"f", b"0"]
    canned = Canned(TIME=TIME, XRANGE=[(b"1799999970000-0", sample), (b"1799999985000-0", quiet)])
    history = canned.drive(lag_history.lag_history(DEP))
    (xrange,) = canned.asked("XRANGE")
    assert xrange.args == ("XRANGE", G.lag_history, str(NOW_MS - 3_600_000), "+", "COUNT", 5001)
    assert [(p.node_id, p.p50_s, p.p99_s, p.fired_1m) for p in history.points] == [
        ("m-1", 0.004, 0.02, 12),
        ("m-2", None, None, 0),
    ]
    assert history.points[0].at == from_ms(NOW_MS - 30_000) and not history.truncated
    many = [(f"{NOW_MS + i}-0".encode(), [b"n", b"m-1"]) for i in range(5001)]
    window = Canned(XRANGE=many)
    cut = window.drive(lag_history.lag_history(DEP, NOW_MS, NOW_MS + 10_000))
    assert cut.truncated and len(cut.points) == 5000 and not window.asked("TIME")
    assert window.asked("XRANGE")[0].args[2:4] == (str(NOW_MS), str(NOW_MS + 10_000))


def depths_answers() -> dict[str, Any]:
    """Shard 2 has 5 entries on its ready stream, 2 claimed (the rest of the shards: no
    group yet), 1 stranded past the last delivered entry; the others are empty."""
    group = [b"name", b"workers", b"pending", 2, b"last-delivered-id", b"17-0"]
    return {
        "XLEN": at({"2/ready": 5}, 0),
        "XPENDING": at({"2/ready": [2, b"17-0", b"16-0", []]}, Exception("NOGROUP no group")),
        "ZCOUNT": at({"2/timer": 1, "2/failures": 4}, 0),
        "ZCARD": at({"2/deadletter": 3}, 0),
        "HMGET": at({"2/stats": [b"6", None, b"1", b"2"]}, [None] * 4),
        "XINFO": at({"2/ready": [group]}, Exception("ERR no such key")),
        "XRANGE": at({"2/ready": [(b"18-0", [b"r", RID.encode()])]}, []),
    }


def test_queue_depths_count_ready_claimed_overdue_and_stranded_per_shard() -> None:
    canned = Canned(**depths_answers())
    depths = canned.drive(status.queue_depths(DEP, NOW_MS))
    assert canned.round_trips == 3 and len(depths) == DEP.n_shards
    assert depths[2] == (3, 2, 1, 3, (6, 0, 1, 2), 1, 4)
    assert depths[0] == (0, 0, 0, 0, (0, 0, 0, 0), 0, 0)  # no group yet: nothing pending
    stranded = {c.args[1]: c.args[2:4] for c in canned.asked("XRANGE")}
    assert stranded[DEP.shard(2).ready] == ("(17-0", NOW_MS - 300_000)  # after the last read
    assert stranded[DEP.shard(0).ready] == ("-", NOW_MS - 300_000)
    (overdue,) = [c for c in canned.asked("ZCOUNT") if c.args[1] == DEP.shard(2).timer]
    assert overdue.args[2:] == ("-inf", NOW_MS - 60_000)


def worker(wid: str, queues: list[str], free: int = 1, draining: bool = False) -> Any:
    return cluster.WorkerView(wid, from_ms(NOW_MS), 4, free, 0, 0, draining, None, 0, queues)


def test_every_queue_a_job_named_is_counted_over_shards_with_who_serves_it() -> None:
    canned = Canned(
        SMEMBERS=at({"3/queues": [b"gpu", b"gpu^h"], "5/queues": [b"gpu"]}, []),
        XLEN=at({"3/ready:gpu": 4, "3/ready:gpu^h": 1, "5/ready:gpu": 2}, 0),
        XPENDING=at({"3/ready:gpu": [1]}, Exception("NOGROUP no group")),
    )
    shards = [status.ShardStatus(s, None, False, 0, 2, 1, 0, 0, 0, 0, 0) for s in range(2)]
    workers = [worker("w-1", ["default", "gpu"], free=2), worker("w-2", ["batch"], draining=True)]
    queues = canned.drive(status.queue_statuses(DEP, shards, workers))
    assert canned.round_trips == 2 and len(canned.asked("XLEN")) == 3
    got = {q.queue: (q.ready, q.running, q.workers, q.slots_free, q.unserved) for q in queues}
    assert got == {
        "default": (4, 2, 1, 2, False),  # the shards' own counts
        "gpu": (6, 1, 1, 2, False),  # both bands, both shards
        "batch": (0, 0, 0, 0, True),  # its one worker drains
    }


def test_the_status_screen_puts_registries_leases_queues_and_children_together() -> None:
    node = msgspec.json.encode(NodeInfo(shards=list(range(7)), lag_p99_1m=0.5, fired_1m=9))
    info = msgspec.json.encode(WorkerInfo(capacity=4, capacity_free=1, overrunning=1))
    child = msgspec.json.encode(Supervised("dev-node", "node", "running", restarts=2))
    members = [b"m-1", str(NOW_MS + 20_000).encode(), b"m-gone", str(NOW_MS - 1).encode()]
    canned = Canned(
        TIME=TIME,
        ZRANGE=at({"g/nodes": members, "g/workers": [b"w-1", members[1]]}),
        HGETALL=at(
            {
                "g/nodeinfo": [b"m-1", node],
                "g/workerinfo": [b"w-1", info],
                "g/supervised": [b"dev-node", child],
            }
        ),
        GET=at({"7/owner": b"m-gone", **{f"{s}/owner": b"m-1" for s in range(7)}}, b"1"),
        PTTL=3000,
        SMEMBERS=[],
        HGET=at({"g/meta": b"2:750"}),  # the durable mode, as a node stores it
        **{**depths_answers(), "HMGET": [None] * 4},
    )
    view = canned.drive(status.status_view(DEP))
    assert (view.durable_replicas, view.durable_timeout_ms) == (2, 750)
    assert view.unowned == [7], "shard 7's owner has no live registration"
    assert (view.ready, view.pending, view.dead_letter, view.stranded, view.failed_1h) == (
        3,
        2,
        3,
        1,
        4,
    )
    assert (view.slots, view.slots_free, view.overrunning) == (4, 1, 1)
    assert (view.trigger_lag_p99_1m, view.fired_1m) == (0.5, 9)
    assert [(c.name, c.restarts) for c in view.supervised] == [("dev-node", 2)]
    assert view.now == datetime.fromtimestamp(NOW_S, UTC)


# --- events, what is under way, many retries ----------------------------------------------

TASK_RUN = f"{DAG}.load:{NOW_MS}:1"
DRID = f"{DAG}:{NOW_MS}"
RAN = (f"{NOW_MS}-0".encode(), [RID.encode(), b"scheduled>running|w-1|"])
DONE = (f"{NOW_MS}-0".encode(), [TASK_RUN.encode(), b"running>succeeded|w-2|exit 0"])
STREAMS = {  # each run's events on its own shard's stream (the job's 5, the DAG's 6)
    f"{DEP.keys_for(JOB).shard}/events": [
        (f"{NOW_MS - 10}-3".encode(), [RID.encode(), b">scheduled||"]),
        RAN,
    ],
    f"{DEP.keys_for(DAG).shard}/events": [DONE],
}


def test_events_merge_every_shards_stream_in_time_order_with_a_cursor_each() -> None:
    canned = Canned(XRANGE=at(STREAMS, []))
    page = canned.drive(events.events_page(DEP))
    assert canned.round_trips == 1 and len(canned.asked("XRANGE")) == DEP.n_shards
    assert canned.asked("XRANGE")[0].args[2:] == ("-", "+", "COUNT", 200)
    made, ran, done = page.events
    assert (made.run_id, made.old, made.new, made.worker) == (RID, None, "scheduled", None)
    assert (ran.at, ran.worker, ran.cursor) == (from_ms(NOW_MS), "w-1", f"{NOW_MS}-5-0-0")
    assert (done.dag_run_id, done.detail, page.next_cursor) == (DRID, "exit 0", done.cursor)
    first = Canned(XRANGE=at(STREAMS, [])).drive(events.events_page(DEP, limit=1))
    assert first.next_cursor == made.cursor == f"{NOW_MS - 10}-5-3-0"


def test_events_continue_after_a_cursor_and_a_job_reads_only_its_shard() -> None:
    canned = Canned(XRANGE=at({"5/events": [RAN], "6/events": [DONE]}, []))  # from there
    page = canned.drive(events.events_page(DEP, after=f"{NOW_MS}-5-0-0"))
    starts = {c.args[1]: c.args[2] for c in canned.asked("XRANGE")}
    assert starts[DEP.shard(5).events] == f"{NOW_MS}-0"  # the entry read part-way
    assert starts[DEP.shard(0).events] == f"{NOW_MS + 1}-0"  # a lower shard: a later ms
    assert starts[DEP.shard(6).events] == f"{NOW_MS}-0"
    assert [e.run_id for e in page.events] == [TASK_RUN]
    one = Canned(XRANGE=at(STREAMS, []))
    by_job = one.drive(events.events_page(DEP, job_id=DAG))
    assert len(one.asked("XRANGE")) == 1 and [e.run_id for e in by_job.events] == [TASK_RUN]
    with pytest.raises(ValidationError):
        Canned().drive(events.events_page(DEP, after="yesterday"))


def test_runs_under_way_are_read_from_each_ready_stream_then_their_records() -> None:
    queued, done, gpu = f"{JOB}:1:1", f"{JOB}:2:1", f"{JOB}:3:1"
    answers = {
        "SMEMBERS": at({"3/queues": [b"gpu"]}, []),
        "XRANGE": at(
            {
                "3/ready": [(b"5-0", [b"r", queued.encode()]), (b"6-0", [b"r", done.encode()])],
                "3/ready:gpu": [(b"2-0", [b"r", gpu.encode()])],
            },
            [],
        ),
        "HMGET": by_run(
            {
                queued: run_fields(st=b"running", c=b"1", w=b"w-1"),
                done: run_fields(st=b"succeeded", c=b"2"),
                gpu: run_fields(st=b"claimed", c=b"3", w=b"w-2"),
            }
        ),
    }
    canned = Canned(**answers)
    page = canned.drive(active.active_page(DEP, active.Active.RUNNING))
    assert canned.round_trips == 3 and [r.run_id for r in page.runs] == [queued, gpu]
    assert page.next_cursor is None
    mine = Canned(**answers).drive(
        active.active_page(DEP, active.Active.RUNNING, filters=active.Filters(worker="w-2"))
    )
    assert [r.run_id for r in mine.runs] == [gpu]
    first = Canned(**answers).drive(active.active_page(DEP, active.Active.RUNNING, limit=1))
    cursor = Cursor.decode(first.next_cursor or "")
    assert cursor == Cursor(3_000_000, b"5-0")  # shard 3's first place, read up to 5-0
    answers["XRANGE"] = at(
        {
            "3/ready": [(b"6-0", [b"r", done.encode()])],  # from (5-0 on
            "3/ready:gpu": [(b"2-0", [b"r", gpu.encode()])],
        },
        [],
    )
    on = Canned(**answers)
    rest = on.drive(active.active_page(DEP, active.Active.RUNNING, cursor=cursor))
    assert [r.run_id for r in rest.runs] == [gpu] and len(on.asked("SMEMBERS")) == 5
    assert on.asked("XRANGE")[0].args[2] == b"(5-0"


def test_a_bulk_retry_retries_each_run_once_and_reports_each_refusal() -> None:
    first, twice = f"{JOB}:1:3", f"{JOB}:2:3"
    canned = Canned(
        retry_run=in_turn([1, f"{JOB}:1:4".encode(), b""], [2, f"{JOB}:2:4".encode()]),
        RPUSH=1,
        LTRIM=b"OK",
        HMGET=run_fields(st=b"scheduled", c=str(NOW_MS).encode()),
    )
    done = canned.drive(bulk_retry.retry_many(DEP, [first, twice, first], "ops"))
    assert len(canned.asked("retry_run")) == 2, "a run named twice is retried once"
    assert [r.run_id for r in done.retried] == [f"{JOB}:1:4"]
    assert [(r.run_id, "already" in r.reason) for r in done.refused] == [(twice, True)]


def test_a_bulk_retry_dry_run_reads_each_run_and_writes_nothing() -> None:
    dead, retried, failed, task = f"{JOB}:1:3", f"{JOB}:2:3", f"{JOB}:3:1", f"{DAG}.a:4:2"
    canned = Canned(
        HMGET=by_run(
            {
                dead: run_fields(st=b"dead_letter", c=b"1"),
                retried: run_fields(st=b"dead_letter", c=b"1", nx=f"{JOB}:2:4".encode()),
                failed: run_fields(st=b"failed", c=b"1"),
                task: run_fields(st=b"dead_letter", c=b"1", d=f"{DAG}:4".encode()),
            }
        ),
        HGET=None,  # no archive: a run not in Redis is not found
    )
    ids = [dead, retried, failed, task, f"{JOB}:9:1"]
    plan = canned.drive(bulk_retry.retry_many(DEP, ids, dry_run=True))
    # a DAG task's dead letter is retried too: it resumes its DAG run (issue #50)
    assert plan.would_retry == [dead, task] and not canned.asked("retry_run")
    why = {r.run_id: r.reason for r in plan.refused}
    assert "already retried" in why[retried] and "not dead-lettered" in why[failed]
    assert task not in why and "not found" in why[f"{JOB}:9:1"]
