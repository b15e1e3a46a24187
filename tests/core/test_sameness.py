"""When two definitions are the same (core/sameness.py): what PUT, `apply` and `export`
decide "unchanged" by, so every default spelled out or left out compares equal, and any
real difference does not."""

from __future__ import annotations

import msgspec

from shardsched.core.models import (
    CronSchedule,
    DagSpec,
    IntervalSchedule,
    JobSpec,
    RetryPolicy,
    TaskSpec,
)
from shardsched.core.sameness import plain, same_definition

CRON = CronSchedule(expression="0 3 * * *")


def test_defaults_spelled_out_or_left_out_are_the_same() -> None:
    short = JobSpec(name="r", command="true", schedule=CRON)
    spelled = msgspec.convert(
        {
            "name": "r",
            "command": "true",
            "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
            "timeout_s": 3600,
            "retry_policy": {"max_attempts": 1, "backoff": "exponential"},
            "labels": {},
            "env": {},
        },
        JobSpec,
    )
    assert same_definition(short, spelled)
    # the tag of a union's member is kept, every default left out, nested ones too
    assert plain(short) == {
        "name": "r",
        "command": "true",
        "schedule": {"type": "cron", "expression": "0 3 * * *"},
    }


def test_any_real_difference_is_a_difference() -> None:
    base = JobSpec(name="r", command="true", schedule=CRON)
    for other in (
        JobSpec(name="r", command="true", schedule=IntervalSchedule(every_s=60)),
        JobSpec(name="r", command="true", schedule=CRON, retry_policy=RetryPolicy(max_attempts=2)),
        JobSpec(name="r", command="true", schedule=CRON, labels={"a": "b"}),
        JobSpec(name="r", command="true", schedule=CRON, timeout_s=3599),
    ):
        assert not same_definition(base, other), other


def test_a_dag_s_tasks_compare_in_order_with_their_defaults_left_out() -> None:
    tasks = [TaskSpec(name="a", command="true"), TaskSpec(name="b", command="true")]
    dag = DagSpec(name="etl", schedule=CRON, tasks=tasks)
    assert plain(dag)["tasks"] == [  # type: ignore[index]
        {"name": "a", "command": "true"},
        {"name": "b", "command": "true"},
    ]
    assert not same_definition(dag, DagSpec(name="etl", schedule=CRON, tasks=tasks[::-1]))
