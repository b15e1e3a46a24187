"""DAG repair, pure: what clearing or marking a task of a DAG run does, planned from the
DAG run as read (each task's state and latest run, the topology it runs on), before
anything is written.

A plan names every task it sets back to waiting (each then decided again by its trigger
rule, as a new attempt under the same DAG run), the attempt each would take and the
retries its policy leaves it, and carries a token: the fingerprint of the DAG run it was
made on. ``lua/repair_dag_run.lua`` applies a plan only while the DAG run still has that
fingerprint, so a plan is applied at most once, and never to a DAG run that moved.

Clear: the task, with its downstream (default), its upstream, or both; ``only_failed``
leaves the tasks that succeeded. Tasks running or not yet released are left as they are.
Mark: the task ends with the outcome given (a new attempt saying who and why), and its
downstream tasks that were skipped (they never ran) are decided again as if it had ended
so; downstream tasks that ran keep their outcome (clear them to run them again).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from shardsched.core.models import TaskName
from shardsched.core.text import Reason

#: A plan's token: the hex SHA-1 of the DAG run it was made on.
Token = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{40}$(?!\n)")]


class ClearRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /dag-runs/{id}/clear``."""

    task: TaskName
    downstream: bool = True  #: its downstream tasks too
    upstream: bool = False  #: its upstream tasks too
    only_failed: bool = False  #: of those, only the ones that did not succeed
    dry_run: bool = False  #: the plan and its token; nothing written
    token: Token | None = None  #: a dry run's: apply exactly that plan, or be refused
    note: Reason = ""  #: why, in the DAG's log of runs by hand


class MarkRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /dag-runs/{id}/mark``."""

    task: TaskName
    state: Literal["succeeded", "failed"]
    note: Reason = ""
    dry_run: bool = False
    token: Token | None = None


class RepairChange(enum.StrEnum):
    """What a plan does to one task."""

    RERUN = "rerun"  #: set back to waiting: decided again, a new attempt if released
    MARK = "mark"  #: ends with the outcome given, as a new attempt
    LEFT_RUNNING = "left_running"  #: selected, but running: left as it is
    LEFT_WAITING = "left_waiting"  #: selected, but not released yet: left as it is
    KEPT = "kept"  #: selected, and kept (only_failed, and it succeeded)


class PlannedTask(msgspec.Struct, omit_defaults=True):
    task: str
    state: str  #: its state in the DAG run now
    change: RepairChange
    attempt: int | None = None  #: the attempt it takes if it runs (or is marked)
    retries_left: int | None = None  #: after that attempt, by its retry policy


class RepairPlan(msgspec.Struct, kw_only=True):
    """A repair's plan (a dry run's answer), or, applied, what it did."""

    dag_run_id: str
    action: Literal["clear", "mark"]
    #: names this plan on this DAG run as it was read: applying it does exactly this plan,
    #: or is refused if the DAG run moved (or the token is another plan's)
    token: str
    dag_run_state: str  #: before the repair
    #: the DAG's topology version (its tasks, wiring and commands; pause and resume do not
    #: change it) the repair runs on: the DAG run's own while it is kept
    topology_version: int
    current_topology_version: int  #: the DAG's now
    #: set when the DAG run ran on a version no longer kept: the repair runs on the current
    #: one (its tasks are all still there), and says so
    ran_on_topology_version: int | None = None
    tasks: list[PlannedTask]
    applied: bool = False
    new_runs: list[str] = msgspec.field(default_factory=list)  #: the attempts it made


#: A task's state in a DAG run by its stored letter (lib/dag.lua).
CODES = {
    "w": "waiting",
    "q": "running",
    "s": "succeeded",
    "f": "failed",
    "u": "upstream_failed",
    "k": "skipped",
}
ENDED = frozenset("sfuk")


@dataclass(frozen=True)
class Snapshot:
    """A DAG run as a plan reads it."""

    state: str  #: the DAG run's ('st')
    tasks: tuple[str, ...]  #: its tasks, in the DAG's order
    codes: Mapping[str, str]  #: each task's letter ('t:<task>')
    latest: Mapping[str, str | None]  #: each task's latest run ('r:<task>')
    deps: Mapping[str, tuple[str, ...]]  #: each task's upstream ('d:<task>')


def plan_token(snap: Snapshot, action: str, task: str, outcome: str, reset: Sequence[str]) -> str:
    """A plan's token: the DAG run's fingerprint and what the plan does, so a token applies
    its own plan only (a clear's token does not apply a mark, nor another selection)."""
    what = "\n".join([fingerprint(snap), action, task, outcome, ",".join(reset)])
    return hashlib.sha1(what.encode()).hexdigest()


def fingerprint(snap: Snapshot) -> str:
    """What lua/repair_dag_run.lua computes from the same fields before it applies."""
    parts = [f"st={snap.state}"]
    for task in snap.tasks:
        parts.append(f"t:{task}={snap.codes.get(task, '')}")
        parts.append(f"r:{task}={snap.latest.get(task) or ''}")
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()


def _reach(start: str, edges: Mapping[str, Iterable[str]]) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def downstream_of(snap: Snapshot, task: str) -> set[str]:
    edges: dict[str, list[str]] = {t: [] for t in snap.tasks}
    for t in snap.tasks:
        for dep in snap.deps.get(t, ()):
            edges.setdefault(dep, []).append(t)
    return _reach(task, edges)


def upstream_of(snap: Snapshot, task: str) -> set[str]:
    return _reach(task, snap.deps)


def upstream_first(snap: Snapshot, chosen: Iterable[str]) -> list[str]:
    """``chosen`` ordered so each task comes after its upstream (ties in the DAG's order)."""
    wanted = set(chosen)
    placed: list[str] = []
    done: set[str] = set()
    while len(placed) < len(wanted):
        ready = [
            t
            for t in snap.tasks
            if t in wanted
            and t not in done
            and all(d in done or d not in wanted for d in snap.deps.get(t, ()))
        ]
        if not ready:  # a cycle cannot be stored; keep the DAG's order for what is left
            ready = [t for t in snap.tasks if t in wanted and t not in done]
        placed.append(ready[0])
        done.add(ready[0])
    return placed


def _attempt(latest: str | None) -> int:
    return 1 if latest is None else int(latest.rsplit(":", 1)[1]) + 1


def _budget(attempt: int, max_attempts: int | None) -> int | None:
    return None if max_attempts is None else max(0, max_attempts - attempt)


def plan_clear(
    snap: Snapshot, request: ClearRequest, max_attempts: Mapping[str, int]
) -> tuple[list[str], list[PlannedTask]]:
    """The tasks a clear sets back to waiting (upstream first) and the plan's rows."""
    chosen = {request.task}
    if request.downstream:
        chosen |= downstream_of(snap, request.task)
    if request.upstream:
        chosen |= upstream_of(snap, request.task)
    reset: list[str] = []
    rows: list[PlannedTask] = []
    for task in upstream_first(snap, chosen):
        code = snap.codes.get(task, "w")
        state = CODES.get(code, code)
        if code == "q":
            rows.append(PlannedTask(task, state, RepairChange.LEFT_RUNNING))
        elif code == "w":
            rows.append(PlannedTask(task, state, RepairChange.LEFT_WAITING))
        elif request.only_failed and code == "s":
            rows.append(PlannedTask(task, state, RepairChange.KEPT))
        else:
            attempt = _attempt(snap.latest.get(task))
            budget = _budget(attempt, max_attempts.get(task))
            rows.append(PlannedTask(task, state, RepairChange.RERUN, attempt, budget))
            reset.append(task)
    return reset, rows


def plan_mark(snap: Snapshot, request: MarkRequest) -> tuple[list[str], list[PlannedTask]]:
    """The downstream tasks a mark sets back to waiting (the skipped ones, upstream first)
    and the plan's rows, the marked task's first."""
    code = snap.codes.get(request.task, "w")
    rows = [
        PlannedTask(
            request.task,
            CODES.get(code, code),
            RepairChange.MARK,
            _attempt(snap.latest.get(request.task)),
        )
    ]
    reset = [
        t
        for t in upstream_first(snap, downstream_of(snap, request.task))
        if snap.codes.get(t) in ("u", "k")
    ]
    for task in reset:
        state = CODES[snap.codes[task]]
        rows.append(PlannedTask(task, state, RepairChange.RERUN, _attempt(snap.latest.get(task))))
    return reset, rows


def script_names(snap: Snapshot, reset: Sequence[str]) -> list[str]:
    """lua/repair_dag_run.lua's names: the DAG run's tasks, then those set back."""
    return [*snap.tasks, *reset]
