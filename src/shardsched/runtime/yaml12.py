"""YAML as our files mean it: only ``true`` and ``false`` are booleans (YAML 1.2), so
a job's ``on:`` list is a key named ``on`` and ``off``, ``yes``, ``no`` stay words.
PyYAML reads YAML 1.1, where ``on:`` is the key ``True`` (GitHub Actions' famous
surprise). For what ``apply``, ``jobs add``, ``edit`` and the test kit read; an
importer of another tool's files reads them as that tool does."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

_BOOL = "tag:yaml.org,2002:bool"
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, if built


class Loader(_Base):
    """A safe loader whose booleans are YAML 1.2's."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()
}
Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)\Z"), list("tTfF")
)


def load(text: str) -> Any:
    return yaml.load(text, Loader=Loader)


def load_all(text: str) -> Iterator[Any]:
    return yaml.load_all(text, Loader=Loader)
