"""One path from a validation error to the ``{field, message}`` every surface reports.

msgspec names where a value broke its type only in its message (``… - at `$.a[0].b```;
a map's bad key ``- at `key` in `$.env```; a map's bad value ``$.env[...]``, without the
key). :func:`field_error` reads that once, into steps (a field, a list index, a map key),
and names the map key msgspec leaves out by checking the document's entries against the
schema's key and value types. The router (a body), the SDK (a spec object) and the CLI
(a file) all call it, so a field is named the same way everywhere: ``$.tasks[0].env.NAME``,
``$.labels["a b"]`` for a key that is no plain name.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

import msgspec

from shardsched.core.errors import ValidationError

Step = str | int
_AT = re.compile(r" - at (`key` in )?`(\$[^`]*)`$")
_NAMED = re.compile(r"^Object (?:missing required|contains unknown) field `([^`]+)`")
_STEP = re.compile(r'\.([^.\[]+)|\[(\d+)\]|\[(\.\.\.)\]|\[("(?:[^"\\]|\\.)*")\]')
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_UNKNOWN = object()  #: a map key msgspec did not name
_CONTAINER: dict[type, type] = {list: list, dict: dict}  #: a container -> its type's origin


def render(steps: Sequence[Step]) -> str:
    """``$`` and each step: ``.name``, ``[0]``, or ``["a key"]`` when it is no plain name."""
    out = ["$"]
    for step in steps:
        if isinstance(step, int):
            out.append(f"[{step}]")
        elif _PLAIN.match(step):
            out.append(f".{step}")
        else:
            out.append(f"[{json.dumps(step)}]")
    return "".join(out)


def parse(field: str) -> list[Any]:
    """The steps of a rendered ``$`` path (msgspec's, or :func:`render`'s); a map key
    msgspec left out (``[...]``) is a placeholder."""
    steps: list[Any] = []
    for name, index, unknown, quoted in _STEP.findall(field.removeprefix("$")):
        if name:
            steps.append(name)
        elif index:
            steps.append(int(index))
        elif unknown:
            steps.append(_UNKNOWN)
        else:
            steps.append(json.loads(quoted))
    return steps


def field_error(
    exc: msgspec.ValidationError, document: Any = None, schema: Any = None
) -> ValidationError:
    """``exc`` as our ValidationError, its ``field`` the $.path of what broke. With the
    ``document`` (plain JSON-like data) and its ``schema`` (the type it was validated as),
    a map key msgspec does not name is found; without them it stays ``[...]``."""
    if isinstance(exc, ValidationError):
        return exc
    message = str(exc)
    steps: list[Any] = []
    on_key = False
    if m := _AT.search(message):
        message, on_key, steps = message[: m.start()], bool(m.group(1)), parse(m.group(2))
    if m := _NAMED.match(message):
        steps.append(m.group(1))
    if on_key or _UNKNOWN in steps:
        steps = _name_the_key(steps, on_key, document, schema)
        if on_key and not isinstance(steps[-1], str | int):
            message += " (a key)"
    field = "".join("[...]" if s is _UNKNOWN else render([s])[1:] for s in steps)
    return ValidationError(message, "$" + field)


def within(err: ValidationError, *prefix: Step) -> ValidationError:
    """The same error, its field under ``prefix`` (an item of a list sent as a whole)."""
    return ValidationError(err.message, render([*prefix, *parse(err.field or "$")]))


def _name_the_key(steps: list[Any], on_key: bool, document: Any, schema: Any) -> list[Any]:
    """``steps`` with the map's key named: the first entry of the map whose key (or value)
    its type refuses. Unchanged when the document or schema does not say."""
    where = len(steps) if on_key else steps.index(_UNKNOWN)
    node, kind = document, schema
    try:
        for step in steps[:where]:
            kind = _member(kind, node, step)
            node = node[step]
        key_type, value_type = _map_types(kind)
        for key, value in node.items():
            wrong = key if on_key else value
            try:
                msgspec.convert(wrong, key_type if on_key else value_type)
            except msgspec.ValidationError:
                return [*steps[:where], key, *steps[where + 1 :]]
    except (LookupError, TypeError, AttributeError, ValueError):
        pass
    return [*steps, _UNKNOWN] if on_key else steps


def _unwrap(kind: Any, node: Any) -> Any:
    """``kind`` without Annotated, and of a union the member ``node`` can be."""
    while typing.get_origin(kind) is typing.Annotated:
        kind = typing.get_args(kind)[0]
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(kind) if m is not type(None)]
        for member in members:
            member = _unwrap(member, node)
            if _is_struct(member) and isinstance(node, dict):
                config = member.__struct_config__
                if config.tag_field is None or node.get(config.tag_field) == config.tag:
                    return member
            elif _CONTAINER.get(type(node)) == typing.get_origin(member):
                return member
        raise TypeError("no member of the union fits")
    return kind


def _is_struct(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


def _member(kind: Any, node: Any, step: Step) -> Any:
    kind = _unwrap(kind, node)
    if isinstance(step, int):
        return typing.get_args(kind)[0]
    for field in msgspec.structs.fields(kind):
        if field.encode_name == step:
            return field.type
    raise LookupError(step)


def _map_types(kind: Any) -> tuple[Any, Any]:
    kind = _unwrap(kind, {})
    if typing.get_origin(kind) is not dict:
        raise TypeError("not a map")
    key_type, value_type = typing.get_args(kind)
    return key_type, value_type
