"""One validation-error path (core/field_errors.py): the field a 422, the SDK and the CLI
name for a bad value, map keys, list indices and nested paths included; and the router
and the SDK name the same field for the same bad definition."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shardsched import ops
from shardsched.core.errors import ValidationError
from shardsched.core.field_errors import field_error, parse, render, within
from shardsched.core.models import DagSpec, IntervalSchedule, JobSpec, RetryPolicy
from shardsched.router.http import ApiError, decode_bytes

JOB = {"name": "x", "schedule": {"type": "interval", "every_s": 60}, "command": "true"}
DAG = {
    "name": "d",
    "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
    "tasks": [{"name": "a", "command": "true"}, {"name": "b", "command": "true"}],
}


def job(**fields: Any) -> dict[str, Any]:
    return {**JOB, **fields}


CASES = [
    (job(env={"GOOD": "x", "1BAD": "v"}), '$.env["1BAD"]'),  # a key: no plain name
    (job(env={"GOOD": "x", "LD_PRELOAD": "/x.so"}), "$.env.LD_PRELOAD"),  # a key
    (job(env={"GOOD": "x", "BAD": "a\x00b"}), "$.env.BAD"),  # a value msgspec leaves unnamed
    (job(labels={"ok": "1", "a b": "c"}), '$.labels["a b"]'),
    (job(schedule={"type": "interval", "every_s": "soon"}), "$.schedule.every_s"),
    ({k: v for k, v in JOB.items() if k != "command"}, "$.command"),  # missing
    (job(bogus=1), "$.bogus"),  # unknown
    (job(retry_policy={"max_attempts": 0}), "$.retry_policy.max_attempts"),
]


@pytest.mark.parametrize(("document", "field"), CASES)
def test_a_bad_job_names_its_field(document: dict, field: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(document, JobSpec)
    assert field_error(caught.value, document, JobSpec).field == field


def test_a_nested_map_in_a_list_is_named_to_its_key() -> None:
    document = {**DAG, "tasks": [DAG["tasks"][0], {**DAG["tasks"][1], "env": {"X": "\x00"}}]}
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(document, DagSpec)
    assert field_error(caught.value, document, DagSpec).field == "$.tasks[1].env.X"
    # without the document the key stays unknown, but the place is right
    assert field_error(caught.value).field == "$.tasks[1].env[...]"
    batch = [JOB, job(env={"Y": "\x00"})]
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(batch, list[JobSpec])
    assert field_error(caught.value, batch, list[JobSpec]).field == "$[1].env.Y"


def test_paths_render_and_parse_back_and_nest_under_an_index() -> None:
    steps = ["tasks", 3, "env", "a b", "x"]
    assert render(steps) == '$.tasks[3].env["a b"].x'
    assert parse(render(steps)) == steps
    err = within(ValidationError("bad", '$.env["a.b"]'), 2)
    assert err.field == '$[2].env["a.b"]' and err.message == "bad"
    assert within(ValidationError("bad", "$"), 0).field == "$[0]"


def sdk_spec(document: dict) -> JobSpec | None:
    """The same definition as the SDK's user builds it, as objects (construction checks
    nothing); None for what only a decoder sees (a missing or unknown field)."""
    if set(document) - set(JobSpec.__struct_fields__) or "command" not in document:
        return None
    base = msgspec.convert(JOB, JobSpec)
    changes: dict[str, Any] = {}
    for name, value in document.items():
        if value == JOB.get(name):
            continue
        if name == "schedule":
            value = IntervalSchedule(every_s=value["every_s"])
        elif name == "retry_policy":
            value = RetryPolicy(**value)
        changes[name] = value
    return msgspec.structs.replace(base, **changes)


@pytest.mark.parametrize(("document", "field"), CASES)
def test_the_router_and_the_sdk_name_the_same_field(document: dict, field: str) -> None:
    with pytest.raises(ApiError) as http:
        decode_bytes(msgspec.json.encode(document), msgspec.json.Decoder(JobSpec))
    assert http.value.status == 422 and http.value.details == {"field": field}
    spec = sdk_spec(document)
    if spec is None:
        return
    with pytest.raises(ValidationError) as sdk:
        ops.validate_specs([spec])
    assert sdk.value.field == field
    with pytest.raises(ValidationError) as sdk:  # a bulk registration: under its index
        ops.validate_specs([msgspec.convert(JOB, JobSpec), spec])
    assert sdk.value.field == "$[1]" + field.removeprefix("$")
