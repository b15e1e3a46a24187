"""The repair planner, pure (core/dag_repair.py): which tasks a clear or a mark sets back
to waiting, in what order, and the token that names the DAG run it was planned on. A
diamond (a → b, a → c, b → d, c → d) with a side task e."""

from __future__ import annotations

import msgspec
import pytest

from shardsched.core.dag_repair import (
    ClearRequest,
    MarkRequest,
    RepairChange,
    Snapshot,
    fingerprint,
    plan_clear,
    plan_mark,
)

DEPS = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c"), "e": ()}


def snap(codes: str, state: str = "failed") -> Snapshot:
    tasks = ("a", "b", "c", "d", "e")
    return Snapshot(
        state=state,
        tasks=tasks,
        codes=dict(zip(tasks, codes, strict=True)),
        latest={t: f"dag_x.{t}:t1:1" for t in tasks},
        deps=DEPS,
    )


def changes(rows) -> dict[str, RepairChange]:
    return {r.task: r.change for r in rows}


def test_clear_takes_the_task_and_its_downstream_upstream_first() -> None:
    reset, rows = plan_clear(snap("sfsus"), ClearRequest(task="b"), {"b": 3})
    assert reset == ["b", "d"]
    assert [(r.task, r.attempt, r.retries_left) for r in rows] == [("b", 2, 1), ("d", 2, None)]


def test_clear_with_upstream_and_only_failed_keeps_what_succeeded() -> None:
    request = ClearRequest(task="d", upstream=True, only_failed=True)
    reset, rows = plan_clear(snap("sfsus"), request, {})
    assert reset == ["b", "d"]
    kept, rerun = RepairChange.KEPT, RepairChange.RERUN
    assert changes(rows) == {"a": kept, "b": rerun, "c": kept, "d": rerun}
    everything = plan_clear(snap("sfsus"), ClearRequest(task="d", upstream=True), {})[0]
    assert everything == ["a", "b", "c", "d"]


def test_running_and_unreleased_tasks_are_left_as_they_are() -> None:
    reset, rows = plan_clear(snap("sqfww", state="running"), ClearRequest(task="a"), {})
    assert reset == ["a", "c"]
    assert (
        changes(rows)["b"] == RepairChange.LEFT_RUNNING
        and changes(rows)["d"] == RepairChange.LEFT_WAITING
    )


def test_mark_decides_again_only_the_skipped_downstream() -> None:
    reset, rows = plan_mark(snap("fusus"), MarkRequest(task="a", state="succeeded"))
    assert reset == ["b", "d"]  # c ran (succeeded): it keeps its outcome
    assert rows[0].change == RepairChange.MARK and rows[0].attempt == 2


def test_the_token_changes_with_any_task_state_or_latest_run() -> None:
    base = snap("sfsus")
    token = fingerprint(base)
    assert token == fingerprint(snap("sfsus")) and len(token) == 40
    assert fingerprint(snap("sqsus")) != token
    moved = Snapshot(base.state, base.tasks, base.codes, {**base.latest, "b": "dag_x.b:t1:2"},
                     base.deps)  # fmt: skip
    assert fingerprint(moved) != token
    assert fingerprint(snap("sfsus", state="running")) != token


@pytest.mark.parametrize(
    "body",
    [b'{"task": ""}', b'{"task": "a", "token": "ABC"}', b'{"task": "a", "note": "x\\u0000"}',
     b'{"task": "a", "only": true}'],
)  # fmt: skip
def test_bad_requests_are_refused_by_their_types(body: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(body, type=ClearRequest)
