"""Reading back what an older version stored and this one no longer accepts.

The checks on a definition grow (a NUL byte in a command became a 422 long after such
commands were stored), and a stored definition that fails a check added since must not
take the API down with it: one such job made ``GET /jobs`` a 422 for everyone, and
could be neither read, changed nor deleted. A stored record is decoded as it was
written; if that fails, each value a check refuses is repaired for display (its
unprintable characters taken out, then the field dropped to its default, then a
placeholder) until the record decodes, and the first problem is returned with it. The
surfaces show the record flagged (``invalid``), let it be deleted or replaced whole,
and refuse to patch it (a patch would write the repaired value back unseen).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from shardsched.core.field_errors import field_error, parse
from shardsched.core.text import UNPRINTABLE

T = TypeVar("T")
_UNPRINTABLE = re.compile(f"[{UNPRINTABLE}]")
#: What a value no repair made acceptable is shown as.
PLACEHOLDER = "(invalid)"
#: Repairs at most (a record has a few dozen fields; each takes at most three).
_MAX_REPAIRS = 64


def decode_stored(decoder: msgspec.json.Decoder[T], raw: bytes) -> tuple[T, str | None]:
    """The record ``raw`` as ``decoder``'s type, and None; or, when a check refuses it,
    the record repaired for display and what was wrong (``$.field: message``). Raises
    msgspec errors for what is no record of that type at all (not JSON, not an object)."""
    try:
        return decoder.decode(raw), None
    except msgspec.ValidationError as exc:
        document = msgspec.json.decode(raw)
        first = field_error(exc, document, decoder.type)
    problem = f"{first.field}: {first.message}"
    tried: dict[str, int] = {}
    error: msgspec.ValidationError = first
    for _ in range(_MAX_REPAIRS):
        field = field_error(error, document, decoder.type).field or "$"
        attempt = tried.get(field, 0)
        tried[field] = attempt + 1
        if field == "$" or not _repair(document, parse(field), attempt):
            raise first
        try:
            return msgspec.convert(document, decoder.type), problem
        except msgspec.ValidationError as exc:
            error = exc
    raise first


def _repair(document: Any, steps: list[Any], attempt: int) -> bool:
    """Change the value at ``steps`` the ``attempt``-th way; False when none is left."""
    parent = document
    for step in steps[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return False
    last = steps[-1]
    try:
        value = parent[last]
    except (KeyError, IndexError, TypeError):
        value, attempt = None, max(attempt, 2)  # a required field, dropped before
    if attempt == 0 and isinstance(value, str):
        cleaned = _UNPRINTABLE.sub("", value)
        if cleaned != value:
            parent[last] = cleaned
            return True
        attempt = 1
    if attempt <= 1 and isinstance(parent, dict):
        del parent[last]  # its default, when it has one
        return True
    if attempt <= 2 and isinstance(parent, dict | list):
        parent[last] = PLACEHOLDER
        return True
    return False
