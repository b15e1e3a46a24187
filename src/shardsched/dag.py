"""DAG topology, pure: validation (duplicates, unknown dependencies, cycles named) and the
order and fan-out the DAG runner needs. No I/O; the runner is issue #6's remaining work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from shardsched.models import DagSpec, TaskSpec


@dataclass(frozen=True)
class Topology:
    order: tuple[str, ...]  #: every task, each after all its dependencies
    roots: tuple[str, ...]  #: tasks without dependencies: released at the tick
    downstream: dict[str, tuple[str, ...]]  #: task -> the tasks that depend on it


def _invalid(message: str, path: str) -> msgspec.ValidationError:
    return msgspec.ValidationError(f"{message} - at `{path}`")


def _find_cycle(deps: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle as a path a -> b -> ... -> a, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in deps[node]:
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in deps:
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def topology(tasks: Sequence[TaskSpec]) -> Topology:
    """Check a DAG's tasks and order them; raises msgspec.ValidationError naming the field
    (a duplicate name, an unknown dependency, or the cycle itself)."""
    index: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.name in index:
            raise _invalid(f"duplicate task name {task.name!r}", f"$.tasks[{i}].name")
        index[task.name] = i
    deps: dict[str, list[str]] = {}
    for i, task in enumerate(tasks):
        for j, dep in enumerate(task.depends_on):
            if dep not in index:
                raise _invalid(f"unknown dependency {dep!r}", f"$.tasks[{i}].depends_on[{j}]")
            if dep == task.name:
                raise _invalid(f"task {dep!r} depends on itself", f"$.tasks[{i}].depends_on[{j}]")
        deps[task.name] = list(dict.fromkeys(task.depends_on))
    if cycle := _find_cycle(deps):
        first = index[cycle[0]]
        raise _invalid(f"dependency cycle: {' -> '.join(cycle)}", f"$.tasks[{first}].depends_on")
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(tasks):
        for task in tasks:
            if task.name not in placed and all(d in placed for d in deps[task.name]):
                order.append(task.name)
                placed.add(task.name)
    downstream: dict[str, list[str]] = {t.name: [] for t in tasks}
    for task in tasks:
        for dep in deps[task.name]:
            downstream[dep].append(task.name)
    return Topology(
        order=tuple(order),
        roots=tuple(t.name for t in tasks if not deps[t.name]),
        downstream={k: tuple(v) for k, v in downstream.items()},
    )


def validate_dag(spec: DagSpec) -> Topology:
    from shardsched.models import checked, validate_schedule

    checked(spec)
    validate_schedule(spec.schedule)
    return topology(spec.tasks)
