"""A notification's words (core/notify_text.py), pure: one DAG run's matches (the DAG
run's own and its tasks') read as one story, not "2 notifications across 2 job(s)"."""

from __future__ import annotations

from datetime import UTC, datetime

from shardsched.core.notify import Kind
from shardsched.core.notify_text import Item, compose

AT = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
DRID = "dag_etl:1796526000000"


def test_one_dag_runs_failure_is_one_story_with_the_task_and_why() -> None:
    items = [
        Item(kind=Kind.FAILED, at=AT, job_id="dag_etl", dag_run_id=DRID, name="etl"),
        Item(kind=Kind.DEAD_LETTER, at=AT, job_id="dag_etl.load",
             run_id="dag_etl.load:1796526000000:2", dag_run_id=DRID, name="etl",
             reason="exit 3"),
    ]  # fmt: skip
    msg = compose("m1", "r1", items, 2)
    assert msg["title"] == f"etl: DAG run {DRID} failed for good (task load dead-lettered: exit 3)"
    assert "across" not in msg["title"] and msg["total"] == 2


def test_matches_of_several_jobs_are_still_counted() -> None:
    items = [
        Item(kind=Kind.FAILED, at=AT, job_id="job_a", run_id="job_a:1:1"),
        Item(kind=Kind.FAILED, at=AT, job_id="job_b", run_id="job_b:1:1"),
    ]
    assert compose("m", "r", items, 2)["title"] == (
        "shardsched: 2 notifications (2 failed for good) across 2 job(s)"
    )
