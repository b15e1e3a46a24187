"""What became of jobs over time, and their lists, on canned replies (tests/canned.py), no
server: a job's versions, what became of fired runs, the change logs, the ledger's
accounting of a job, the job, run and failure lists, and the schedule preview with
named calendars. Each pins what the operation asks Redis (keys, bounds, round trips) and
what it makes of each answer, refusals included."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import msgspec
import pytest

from canned import DAG, DEP, JOB, NOW_MS, SPEC, TIME, Canned, in_turn, job_fields
from shardsched.core.calendars import Calendar, CalendarRule
from shardsched.core.errors import DagNotFound, DagTaskJob, JobNotFound, ValidationError
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule, RunState, SchedulePreviewRequest, Timing
from shardsched.core.schedule_kinds import CronSchedule
from shardsched.ops import listing
from shardsched.ops.history import changes, stats
from shardsched.ops.history.executions import Execution, executions
from shardsched.ops.jobs import versions
from shardsched.ops.pagination import Cursor
from shardsched.ops.schedules import calendars, preview
from shardsched.store.calls import Call
from shardsched.store.records import RUN_FIELDS

G = DEP.globals
SK = DEP.keys_for(JOB)
DRID = f"{DAG}:{NOW_MS}"


def run_fields(**values: bytes) -> list[bytes | None]:
    """A run hash as HMGET answers it (store/records.RUN_FIELDS), by stored letter."""
    return [values.get(letter) for letter in RUN_FIELDS]


def by_key(answers: dict[str, Any], default: Any = None) -> Callable[[Call], Any]:
    """An answer by the name of the key a call names after its shard ('runs:<job>')."""
    return lambda call: answers.get(call.args[1].split("}:", 1)[1], default)


# --- versions, executions, change logs ------------------------------------------------------


def test_a_jobs_versions_are_its_kept_definitions_then_its_current_one() -> None:
    old = msgspec.json.encode(msgspec.structs.replace(SPEC, command="false"))
    canned = Canned(
        HMGET=in_turn(job_fields(version=2), [msgspec.json.encode(SPEC), b"5000", b"ops"]),
        ZSCORE=None,
        HGETALL=[b"1", b"active|1000|me|" + old],
    )
    listed = canned.drive(versions.job_versions(DEP, JOB))
    v1, v2 = listed.versions
    assert (v1.version, v1.spec.command, v1.changed_by) == (1, "false", "me")
    assert (v2.version, v2.spec.command, v2.changed_by) == (2, "true", "ops")
    assert (v1.valid_from, v1.valid_until, v2.valid_until) == (from_ms(1000), from_ms(5000), None)
    assert canned.asked("HGETALL")[0].args == ("HGETALL", DEP.keys_for(JOB).versions(JOB))
    task = job_fields(dag=DAG)
    task[0] = b'{"name":"load","command":"true"}'
    timing = b'{"schedule":{"type":"interval","every_s":60.0}}'
    with pytest.raises(DagTaskJob):
        Canned(HMGET=in_turn(task, [timing, b"active"]), ZSCORE=None).drive(
            versions.job_versions(DEP, f"{DAG}.load")
        )


def test_executions_follow_each_fired_run_to_its_last_attempt() -> None:
    old = str(NOW_MS - 600_000).encode()
    runs = {
        f"{JOB}:1:1": [b"failed", None, old, None, f"{JOB}:1:2".encode()],
        f"{JOB}:1:2": [b"running", str(NOW_MS - 20_000).encode(), old, None, None],
        f"{JOB}:2:1": [b"succeeded", None, old, None, None],
        f"{JOB}:3:1": [b"scheduled", None, old, None, None],
        f"{JOB}:4:1": [b"scheduled", None, str(NOW_MS - 1000).encode(), None, None],
        f"{JOB}:5:1": [b"waiting", None, old, None, None],
    }
    canned = Canned(HMGET=lambda call: runs.get(call.args[1].split("}:run:")[1], [None] * 5))
    rids = [DRID, *(f"{JOB}:{n}:1" for n in range(1, 8))]
    got = canned.drive(executions(DEP, rids, NOW_MS, 300_000, {f"{JOB}:7:1": ("succeeded", None)}))
    assert canned.round_trips == 2 and canned.asked("HMGET")[0].args[2:] == (
        "st",
        "l",
        "c",
        "due",
        "nx",
    )
    assert got == {
        f"{JOB}:1:1": Execution.STRANDED,  # its retry's lease lapsed past the grace
        f"{JOB}:2:1": Execution.TERMINAL,
        f"{JOB}:3:1": Execution.STRANDED,  # fired 10 min ago, no worker took it
        f"{JOB}:4:1": Execution.QUEUED,
        f"{JOB}:5:1": Execution.WAITING,
        DRID: Execution.DAG,
        f"{JOB}:6:1": Execution.STRANDED,  # its record is gone
        f"{JOB}:7:1": Execution.TERMINAL,  # gone to the archive: it had finished
    }


LOG = {  # a job's change log and its log of runs by hand, newest first each
    f"chg:{JOB}": [(b"5000-0", [b"a", b"update", b"by", b"ops", b"v", b"3"]),
                   (b"3000-0", [b"a", b"pause", b"by", b"me", b"v", b"2", b"x", b"lunch"])],
    f"acts:{JOB}": [(b"4000-0", [b"a", b"trigger", b"by", b"ci", b"x", b"job_x:t1:1"])],
}  # fmt: skip


def test_a_change_log_merges_changes_and_runs_by_hand_then_the_creation() -> None:
    answers = {"HMGET": [b"1000", b"3", b"ops"], "XREVRANGE": by_key(LOG, []),
               "HGET": b"active|1000|alice|" + msgspec.json.encode(SPEC)}  # fmt: skip
    canned = Canned(**answers)
    log = canned.drive(changes.job_changes(DEP, JOB))
    assert canned.round_trips == 1
    assert [(c.action, c.by, c.version, c.detail) for c in log.changes] == [
        ("update", "ops", 3, None), ("trigger", "ci", None, "job_x:t1:1"),
        ("pause", "me", 2, "lunch"), ("create", "alice", 1, None),
    ]  # fmt: skip
    assert log.changes[-1].at == from_ms(1000) and log.next_cursor is None
    page = Canned(**answers).drive(changes.job_changes(DEP, JOB, limit=2))
    assert (len(page.changes), page.next_cursor) == (2, "4000-0")
    on = Canned(**{**answers, "XREVRANGE": by_key({f"chg:{JOB}": LOG[f"chg:{JOB}"][1:]}, [])})
    rest = on.drive(changes.job_changes(DEP, JOB, limit=2, cursor="4000-0"))
    assert on.asked("XREVRANGE")[0].args[2:] == ("(4000-0", "-", "COUNT", 3)
    assert [c.action for c in rest.changes] == ["pause", "create"]


def test_a_change_log_of_nothing_or_of_the_wrong_kind_of_id_is_not_found() -> None:
    with pytest.raises(JobNotFound):
        Canned(HMGET=[None] * 3, XREVRANGE=[], HGET=None).drive(changes.job_changes(DEP, JOB))
    for op, error in ((changes.job_changes(DEP, DAG), JobNotFound),
                      (changes.dag_changes(DEP, JOB), DagNotFound)):  # fmt: skip
        with pytest.raises(error):
            Canned().drive(op)  # nothing asked
    with pytest.raises(ValidationError):
        Canned().drive(changes.dag_changes(DEP, DAG, cursor="0-0"))


# --- the ledger: a job's accounting -----------------------------------------------------

H = 3_600_000
TICKS = [NOW_MS - n * H for n in (4, 3, 2, 1, 0)]  # an hourly job's last five ticks


def ledger(first: bytes | None = str(TICKS[0]).encode()) -> dict[str, Any]:
    """load_history's reads: the first tick ran on time, the second was skipped by its
    overlap, the third is lost, the fourth ran 90 s late, the fifth is the timer's."""
    timing = msgspec.json.encode(Timing(IntervalSchedule(every_s=3600)))
    fired = {f"{JOB}:{TICKS[0]}:1": TICKS[0] + 500, f"{JOB}:{TICKS[3]}:1": TICKS[3] + 90_000}
    skip = f"{TICKS[1]}:{TICKS[1]}:1:overlap:{TICKS[1] + 10}".encode()
    runs = [part for rid, t in fired.items() for part in (rid.encode(), str(t // H * H))]
    return {
        "HMGET": lambda c: [first, timing if first else None, None] if ":job:" in c.args[1]
        else [str(fired[c.args[1].split("}:run:")[1]]).encode(), None],
        "LRANGE": [], "ZSCORE": str(TICKS[4]).encode(), "HGET": None,
        "ZRANGE": by_key({f"runs:{JOB}": runs, f"skips:{JOB}": [skip]}, []),
    }  # fmt: skip


def test_a_jobs_stats_count_its_ticks_and_compare_its_cadence_with_its_schedule() -> None:
    canned = Canned(TIME=TIME, **ledger())
    got = canned.drive(stats.job_stats(DEP, JOB, None, None))
    assert canned.round_trips == 4  # the clock; the ledger; its runs' records; the archive
    assert (got.ticks, got.fired, got.late, got.missed, got.pending) == (5, 2, 1, 1, 1)
    assert (got.skipped, got.configured_every_s, got.effective_every_s) == (
        {"overlap": 1}, 3600.0, 10800.0,
    )  # fmt: skip
    assert got.summary.endswith(": 1 skipped by overlap, 1 missed, 1 late")
    assert (got.since, got.until) == (from_ms(NOW_MS - 86_400_000), from_ms(NOW_MS))
    with pytest.raises(JobNotFound):
        Canned(TIME=TIME, **ledger(first=None)).drive(stats.job_stats(DEP, JOB, None, None))


# --- lists --------------------------------------------------------------------------------


def test_the_job_list_merges_every_shards_index_and_decodes_only_what_it_keeps() -> None:
    index = {f"{SK.shard}/jobs": [JOB.encode(), b"2000"], "7/jobs": [b"job_a", b"1000"]}
    light = [b"active", None, job_fields()[0]]  # status, dag, spec: deleted ones are left out
    canned = Canned(
        ZRANGE=lambda c: index.get(c.args[1].split("{")[1].replace("}:", "/"), []),
        HMGET=lambda c: light if c.args[2:] == ("status", "dag", "spec") else job_fields(),
        ZSCORE=None,
    )  # fmt: skip
    page = canned.drive(listing.jobs_page(DEP, limit=1))
    assert canned.round_trips == 3 and len(canned.asked("ZRANGE")) == DEP.n_shards
    assert canned.asked("ZRANGE")[0].args[2:] == ("+inf", "-inf", "BYSCORE", "REV", "LIMIT", 0,
                                                  266, "WITHSCORES")  # fmt: skip
    assert [j.job_id for j in page.jobs] == [JOB]
    assert Cursor.decode(page.next_cursor or "") == Cursor(2000.0, JOB.encode())
    gone = Canned(**{**canned.answers, "HMGET": [b"deleted", None, job_fields()[0]]})
    assert gone.drive(listing.jobs_page(DEP)).jobs == [] and not gone.asked("ZSCORE")


def test_a_jobs_runs_are_listed_from_its_index_in_a_window_and_a_state() -> None:
    failed, ok = f"{JOB}:3000:1", f"{JOB}:2000:1"
    canned = Canned(
        EXISTS=1, HGET=None, ZRANGE=[failed.encode(), b"3000", ok.encode(), b"2000"],
        HMGET=lambda c: run_fields(st=b"failed" if failed in c.args[1] else b"succeeded", c=b"1"),
    )  # fmt: skip
    page = canned.drive(listing.runs_page(DEP, JOB, state=RunState.FAILED, since_ms=1, until_ms=9))
    assert [r.run_id for r in page.runs] == [failed] and page.next_cursor is None
    (index,) = canned.asked("ZRANGE")
    assert index.args[1:4] == (SK.runs_of(JOB), "9", "1")  # newest first within the window
    for exists, any_id in ((0, JOB), (1, DAG)):
        missing = Canned(EXISTS=exists)
        with pytest.raises(JobNotFound):
            missing.drive(listing.runs_page(DEP, any_id))
        assert len(missing.calls) == 1


def test_the_failure_inbox_lists_only_failures_and_a_teams_only_its_own() -> None:
    refused = Canned()
    with pytest.raises(ValidationError, match="failed and dead_letter"):
        refused.drive(listing.failures_page(DEP, states=frozenset({RunState.RUNNING})))
    assert refused.calls == []
    ours, theirs = f"job_a:{NOW_MS}:1", f"{JOB}:{NOW_MS}:1"
    names = {"job:job_a": b'{"name":"team-a-x"}', f"job:{JOB}": b'{"name":"hourly"}'}
    canned = Canned(
        ZRANGE=lambda c: [ours.encode(), b"2", theirs.encode(), b"1"] if "{7}" in c.args[1] else [],
        HMGET=run_fields(st=b"dead_letter", c=b"1"), HGET=by_key(names),
    )  # fmt: skip
    page = canned.drive(listing.failures_page(DEP, within=("team-a-",)))
    assert [r.run_id for r in page.runs] == [ours] and page.next_cursor is None


# --- the schedule preview, with named calendars ------------------------------------------

DAILY = CronSchedule(expression="0 9 * * *")  # the server's now is 2027-01-15 08:00 UTC


def test_a_preview_counts_from_the_servers_clock() -> None:
    canned = Canned(TIME=TIME)
    got = canned.drive(preview.preview_schedule(SchedulePreviewRequest(DAILY, count=2)))
    assert [t.at.day for t in got.fire_times] == [15, 16] and got.fire_times[0].at.hour == 9
    assert canned.round_trips == 1


def test_a_preview_naming_calendars_reads_the_book_and_skips_their_days() -> None:
    rule = CalendarRule(exclude=["holidays"])
    request = SchedulePreviewRequest(DAILY, count=3, calendars=rule)
    book = [b"holidays", msgspec.json.encode(Calendar(dates=[date(2027, 1, 16)]))]
    canned = Canned(HMGET=[book[1]], HGETALL=book, TIME=TIME)
    got = canned.drive(preview.preview_with_calendars(DEP, request))
    assert [t.at.date().day for t in got.fire_times] == [15, 17, 18]
    assert canned.asked("HMGET")[0].args == ("HMGET", G.calendars.book, "holidays")
    missing = Canned(HMGET=[None])
    with pytest.raises(ValidationError, match="no such calendar: holidays"):
        missing.drive(preview.preview_with_calendars(DEP, request))
    assert not missing.asked("TIME") and not missing.asked("HGETALL")


def test_require_calendars_asks_nothing_when_no_rule_names_one() -> None:
    canned = Canned()
    canned.drive(calendars.require_calendars(DEP, [None, CalendarRule()]))
    assert canned.calls == []
    both = Canned(HMGET=[b"{}", None])
    with pytest.raises(ValidationError, match="no such calendar: b -"):
        both.drive(calendars.require_calendars(DEP, [CalendarRule(["b"]), CalendarRule(["a"])]))
    assert both.asked("HMGET")[0].args[2:] == ("a", "b")  # each name once, sorted
