"""A run's trace id, asked of every run a traced worker claims, is cut short for a plain
job's run id (core/trace_ids.trace_id); the long way (its firing by ``firing_of``, then
hashed) is the definition, and the short cut must agree with it on every id, a DAG
task's, a malformed one and a hostile one included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsched.core import trace_ids


def by_definition(run_id: str) -> int:
    return trace_ids.firing_trace_id(trace_ids.firing_of(run_id))


def outcome(f, run_id: str) -> object:  # type: ignore[no-untyped-def]
    try:
        return f(run_id)
    except ValueError:
        return ValueError


@pytest.mark.parametrize(
    "run_id",
    [
        "job_x:1000:1",
        "job_x:1000:12",
        "dag_etl.load:1000:1",  # a DAG task's run: its DAG run's trace
        "dag_etl.load:t3:2",  # a manual DAG run's task
        "a.b:1000:1",  # a dot, but no DAG's id
        "a:b:c:1",  # a colon in the job part
        "a:b::1",
        "a::1",
        ":1000:1",
        "job_x:1000:",
        "job_x:1000:x",
        "job_x:1000",
        "job_x",
        "",
        "dag_etl:1000",  # a DAG run's id is no run id
        "job_x:1000:\u0661",  # a non-ASCII digit
    ],
)
def test_the_short_cut_is_the_definition(run_id: str) -> None:
    assert outcome(trace_ids.trace_id, run_id) == outcome(by_definition, run_id)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(["job_x", "dag_e", ".", ":", "1", "t", "", "٣", "é"]), max_size=8))
def test_the_short_cut_is_the_definition_on_any_id(parts: list[str]) -> None:
    run_id = "".join(parts)
    assert outcome(trace_ids.trace_id, run_id) == outcome(by_definition, run_id)


@pytest.mark.parametrize("key", ["job_x:1000", "dag_e:t3", "é:ü", "", "x" * 300])
def test_each_id_is_blake2b_under_its_personalisation(key: str) -> None:
    """What every process derives alike, written out with a fresh hasher each time."""
    import hashlib

    def blake(person: bytes, size: int) -> int:
        digest = hashlib.blake2b(key.encode(), digest_size=size, person=person).digest()
        return int.from_bytes(digest, "big") or 1

    assert trace_ids.firing_trace_id(key) == blake(b"sstrace", 16)
    assert trace_ids.firing_root_id(key) == blake(b"ssfiring", 8)
    assert trace_ids.attempt_span_id(key) == blake(b"ssattempt", 8)
    assert trace_ids.firing_trace_id(key) == blake(b"sstrace", 16)  # the hasher copied again
