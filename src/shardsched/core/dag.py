"""DAG topology, pure: validation (duplicates, unknown dependencies, cycles named) and the
order and fan-out the DAG runner (``lua/lib/dag.lua``, called from complete.lua) needs. No
I/O, and linear in tasks plus edges: it runs on every DAG registration."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from shardsched.core.concurrency import resolve_key
from shardsched.core.errors import ValidationError
from shardsched.core.events import validate_on
from shardsched.core.models import DagSpec, TaskSpec
from shardsched.core.validation import checked, validate_schedule


@dataclass(frozen=True)
class Topology:
    order: tuple[str, ...]  #: every task, each after all its dependencies
    roots: tuple[str, ...]  #: tasks without dependencies: released at the tick
    downstream: dict[str, tuple[str, ...]]  #: task -> the tasks that depend on it


def _invalid(message: str, path: str) -> msgspec.ValidationError:
    return ValidationError(message, path)


def _find_cycle(deps: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle as a path a -> b -> ... -> a, or None. Iterative (a DAG may be a
    1,000-task chain listed downstream-first: no recursion depth to run out of)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in deps:
        if start in state:
            continue
        path: list[str] = [start]
        todo: list[list[str]] = [list(reversed(deps[start]))]  # per path node: deps left
        state[start] = 1
        while path:
            if not todo[-1]:
                state[path.pop()] = 2
                todo.pop()
                continue
            dep = todo[-1].pop()
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state:
                state[dep] = 1
                path.append(dep)
                todo.append(list(reversed(deps[dep])))
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
    downstream: dict[str, list[str]] = {t.name: [] for t in tasks}
    for task in tasks:
        for dep in deps[task.name]:
            downstream[dep].append(task.name)
    # Kahn's algorithm, ties broken by listing order: O(tasks + edges).
    waiting = {t.name: len(deps[t.name]) for t in tasks}
    ready = [index[t.name] for t in tasks if not deps[t.name]]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = tasks[heapq.heappop(ready)].name
        order.append(name)
        for child in downstream[name]:
            waiting[child] -= 1
            if not waiting[child]:
                heapq.heappush(ready, index[child])
    return Topology(
        order=tuple(order),
        roots=tuple(t.name for t in tasks if not deps[t.name]),
        downstream={k: tuple(v) for k, v in downstream.items()},
    )


def validate_dag(spec: DagSpec) -> Topology:
    checked(spec)
    validate_schedule(spec.schedule)
    validate_on(spec.on)
    for i, task in enumerate(spec.tasks):
        stored_task(task, spec.labels, f"$.tasks[{i}]")
    return topology(spec.tasks)


def stored_task(task: TaskSpec, labels: dict[str, str], path: str = "$") -> TaskSpec:
    """The task as stored: its concurrency key resolved over its DAG's ``labels`` (a
    worker reads a task's key as it is). Raises ValidationError at ``path``."""
    if task.concurrency_key is None:
        if task.concurrency_limit is not None:
            raise _invalid(
                "a concurrency_limit needs a concurrency_key", f"{path}.concurrency_limit"
            )
        return task
    key = resolve_key(task.concurrency_key, labels, f"{path}.concurrency_key")
    return msgspec.structs.replace(task, concurrency_key=key)
