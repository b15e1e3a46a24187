"""When two definitions of a job or DAG are the same: equal field by field once every
field that holds its default is left out, so ``"timeout_s": 3600`` written out and left
out compare equal. What a PUT, ``apply`` and its dry run decide "unchanged" by."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgspec

#: A field as :func:`plain` needs it: name, name encoded, default, default factory.
_Field = tuple[str, str, Any, Callable[[], Any] | Any]


@functools.cache
def _shape(cls: type[msgspec.Struct]) -> tuple[tuple[_Field, ...], str | None, Any]:
    """A Struct type's fields and tag, read once a type: msgspec works them out from the
    type hints on every call (hundreds of µs a call, most of a ``plain``)."""
    fields = tuple(
        (f.name, f.encode_name, f.default, f.default_factory) for f in msgspec.structs.fields(cls)
    )
    config = cls.__struct_config__
    return fields, config.tag_field, config.tag


def plain(value: object) -> object:
    """A Struct as builtins with every field equal to its default left out, recursively:
    two definitions that mean the same compare equal however they were spelled
    (``"timeout_s": 3600`` given or not). msgspec's ``omit_defaults`` cannot say this: it
    leaves out a default only when it is the very default object."""
    if isinstance(value, msgspec.Struct):
        fields, tag_field, tag = _shape(type(value))
        out = {} if tag_field is None else {tag_field: tag}
        for name, encode_name, default, factory in fields:
            item = getattr(value, name)
            if default is msgspec.NODEFAULT and factory is not msgspec.NODEFAULT:
                default = factory()
            if default is not msgspec.NODEFAULT and item == default:
                continue
            out[encode_name] = plain(item)
        return out
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return msgspec.to_builtins(value)


def same_definition(a: msgspec.Struct, b: msgspec.Struct) -> bool:
    """Whether two definitions mean the same (see :func:`plain`)."""
    return plain(a) == plain(b)
