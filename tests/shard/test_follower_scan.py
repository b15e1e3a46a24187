"""The follower looks for events that end a firing no worker completes (a DAG run's, a
cancellation, a poison run) in every entry of a shard's stream, first at the entry's
joined bytes; what it finds must be what a look at each event finds (the definition,
written out here), on entries of any make."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shardsched.shard.follower import _ended_elsewhere


def by_definition(flat: list[bytes]) -> list[tuple[str, str]]:
    out = []
    for i in range(0, len(flat), 2):
        rid, value = flat[i], flat[i + 1]
        dag_run = rid.count(b":") == 1
        if dag_run or b">cancelled|" in value or value.endswith(b"|poison"):
            out.append((rid.decode(), value.decode()))
    return out


RIDS = [b"job_a:1000:1", b"job_b:m5:2", b"dag_e.load:1000:1", b"dag_e:1000", b"dag_e:t4"]
VALUES = [
    b"running>succeeded|w1|",
    b">pending||",
    b"pending>running|w1|",
    b"running>failed|w1|poison",
    b"running>failed|w1|poison\nmore",  # a newline in a detail: the joined look is fooled
    b"running>failed|w1|exit 1",
    b"running>cancelled|w1|by op",
    b"pending>cancelled||",
    b"running>dead_letter|w1|",
    b"|poison",
    b"",
]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(RIDS), st.sampled_from(VALUES)), max_size=40))
def test_the_joined_look_finds_what_each_event_holds(events: list[tuple[bytes, bytes]]) -> None:
    flat = [part for event in events for part in event]
    assert _ended_elsewhere(flat) == by_definition(flat)


def test_a_burst_entry_with_one_cancellation_in_it() -> None:
    flat = [b for i in range(500) for b in (b"job_%d:1000:1" % i, b"running>succeeded|w|")]
    assert _ended_elsewhere(flat) == []
    flat[601] = b"running>cancelled|w|"
    assert _ended_elsewhere(flat) == [("job_300:1000:1", "running>cancelled|w|")]
