"""Our YAML files read with YAML 1.2's booleans: a job's ``on:`` is a key (PyYAML's
YAML 1.1 makes it ``True``), ``yes``/``no``/``off`` stay words, ``true``/``false`` are
booleans, and everything else reads as PyYAML's safe loader reads it."""

from __future__ import annotations

import yaml

from shardsched.runtime import yaml12


def test_on_is_a_key_and_only_true_and_false_are_booleans() -> None:
    text = "on: [{event: e}]\nyes: no\nOff: ON\na: true\nb: False\nc: TRUE\nd: y\n"
    assert yaml12.load(text) == {
        "on": [{"event": "e"}], "yes": "no", "Off": "ON", "a": True, "b": False, "c": True,
        "d": "y",
    }  # fmt: skip
    assert yaml.safe_load("on: 1") == {True: 1}  # what YAML 1.1 would have made


def test_the_rest_reads_as_the_safe_loader_reads_it() -> None:
    text = "n: 1\nf: 1.5\nz: null\nt: 2026-01-01\ns: '1'\nl: [1, two]\nm: {k: v}\n"
    assert yaml12.load(text) == yaml.safe_load(text)
    assert list(yaml12.load_all("a: 1\n---\non: 2\n")) == [{"a": 1}, {"on": 2}]
