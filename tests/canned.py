"""Canned Redis replies for driving an operation with no server (tests/ops/test_ops_canned*.py):
a table of answers by command or script name, every call kept, an unexpected one a
failure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.store.calls import Call, Op
from shardsched.store.deployment import Deployment
from shardsched.store.records import JOB_FIELDS

DEP = Deployment("canned", 8)
NOW_S = 1_800_000_000  # the server's clock in every TIME reply
NOW_MS = NOW_S * 1000
JOB = "job_0123456789ab"
DAG = "dag_0123456789ab"

Answer = Any | Callable[[Call], Any]


class Canned:
    """Answers an operation's calls from a table (a command by its name, a script by its
    own) and keeps every call it was asked; an unexpected call fails the test."""

    def __init__(self, **answers: Answer) -> None:
        self.answers = answers
        self.calls: list[Call] = []
        self.round_trips = 0

    def name(self, call: Call) -> str:
        return call.script or str(call.args[0]).upper()

    def reply(self, call: Call) -> Any:
        self.calls.append(call)
        name = self.name(call)
        if name not in self.answers:
            raise AssertionError(f"unexpected call {name}: {call.args[:3]}")
        answer = self.answers[name]
        if isinstance(answer, list) and answer and isinstance(answer[0], _Seq):
            return answer.pop(0).value  # a different answer each time
        return answer(call) if callable(answer) else answer

    def drive(self, op: Op) -> Any:
        try:
            calls = next(op)
            while True:
                self.round_trips += 1
                calls = op.send([self.reply(call) for call in calls])
        except StopIteration as stop:
            return stop.value

    def asked(self, name: str) -> list[Call]:
        return [call for call in self.calls if self.name(call) == name]


class _Seq:
    def __init__(self, value: Any) -> None:
        self.value = value


def in_turn(*values: Any) -> list[_Seq]:
    """Answers given one after the other to the same call."""
    return [_Seq(v) for v in values]


TIME = [str(NOW_S).encode(), b"0"]
SPEC = JobSpec(name="hourly", schedule=IntervalSchedule(every_s=3600), command="true")


def job_fields(status: str = "active", version: int = 1, dag: str | None = None) -> list[Any]:
    """A job hash as HMGET answers it (store/records.JOB_FIELDS)."""
    values = {
        "spec": msgspec.json.encode(msgspec.structs.replace(SPEC, id=None)),
        "status": status.encode(),
        "created": str(NOW_MS - 60_000).encode(),
        "updated": str(NOW_MS - 60_000).encode(),
        "version": str(version).encode(),
        "dag": None if dag is None else dag.encode(),
        "pr": None,
        "pa": None,
        "pu": None,
        "inc": None,
        "born": None,
        "nf": None,
        "fc": None,
    }
    return [values[f] for f in JOB_FIELDS]
