"""core/labels.py: the ``?label=`` filter and the ``critical`` label."""

from __future__ import annotations

import pytest

from shardsched.core.errors import ValidationError
from shardsched.core.labels import is_critical, matches, parse_label_filter


def test_a_filter_is_key_value_pairs_split_at_the_first_colon() -> None:
    assert parse_label_filter("team:payments") == {"team": "payments"}
    assert parse_label_filter("team:payments, tier:gold") == {"team": "payments", "tier": "gold"}
    assert parse_label_filter("url:http://x") == {"url": "http://x"}  # a key holds no ':'
    assert parse_label_filter("empty:") == {"empty": ""}


@pytest.mark.parametrize("bad", ["team", ":x", "a:b,,c:d", "a:1,a:2"])
def test_a_bad_filter_names_the_parameter(bad: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_label_filter(bad)
    assert caught.value.field == "$.label"


def test_every_pair_must_match() -> None:
    labels = {"team": "payments", "tier": "gold"}
    assert matches(labels, {"team": "payments"})
    assert matches(labels, {"team": "payments", "tier": "gold"})
    assert not matches(labels, {"team": "payments", "tier": "silver"})
    assert not matches({}, {"team": "payments"})


@pytest.mark.parametrize(
    ("labels", "critical"),
    [
        ({"critical": "true"}, True),
        ({"critical": "YES"}, True),
        ({"critical": "1"}, True),
        ({"critical": "false"}, False),
        ({"critical": ""}, False),
        ({"tier": "critical"}, False),
        ({}, False),
    ],
)
def test_critical_is_the_critical_label_set_to_true(labels: dict, critical: bool) -> None:
    assert is_critical(labels) is critical
