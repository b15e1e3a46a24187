"""DAG validation and ordering (pure): the groundwork of issue #6."""

from __future__ import annotations

import msgspec
import pytest

from shardsched.core.dag import topology, validate_dag
from shardsched.core.models import DagSpec, TaskSpec


def tasks(edges: dict[str, list[str]]) -> list[TaskSpec]:
    return [TaskSpec(name=n, command="true", depends_on=d) for n, d in edges.items()]


def test_etl_and_diamond_order() -> None:
    etl = topology(tasks({"extract": [], "transform": ["extract"], "load": ["transform"]}))
    assert etl.order == ("extract", "transform", "load") and etl.roots == ("extract",)
    diamond = topology(tasks({"d": ["b", "c"], "b": ["a"], "c": ["a"], "a": []}))
    assert diamond.order.index("a") == 0 and diamond.order[-1] == "d"
    assert diamond.downstream == {"a": ("b", "c"), "b": ("d",), "c": ("d",), "d": ()}


@pytest.mark.parametrize(
    ("edges", "message", "field"),
    [
        ({"a": ["x"]}, "unknown dependency 'x'", "$.tasks[0].depends_on[0]"),
        ({"a": ["a"]}, "task 'a' depends on itself", "$.tasks[0].depends_on[0]"),
        (
            {"a": ["c"], "b": ["a"], "c": ["b"]},
            "dependency cycle: a -> c -> b -> a",
            "$.tasks[0].depends_on",
        ),
    ],
)
def test_invalid_dags_name_the_problem(edges, message, field) -> None:
    with pytest.raises(msgspec.ValidationError) as err:
        topology(tasks(edges))
    assert message in str(err.value) and f"`{field}`" in str(err.value)


def test_duplicate_task_names() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"duplicate task name 'a'.*tasks\[1\]"):
        topology([TaskSpec(name="a", command="x"), TaskSpec(name="a", command="y")])


def test_dag_spec_decodes_and_validates() -> None:
    raw = b"""{"name": "etl", "schedule": {"type": "cron", "expression": "0 3 * * *"},
              "tasks": [{"name": "extract", "command": "e"},
                        {"name": "load", "command": "l", "depends_on": ["extract"],
                         "trigger_rule": "all_done"}]}"""
    spec = msgspec.json.decode(raw, type=DagSpec)
    assert validate_dag(spec).order == ("extract", "load")
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(raw.replace(b"all_done", b"sometimes"), type=DagSpec)
