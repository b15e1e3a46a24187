"""When two definitions of a job or DAG are the same: equal field by field once every
field that holds its default is left out, so ``"timeout_s": 3600`` written out and left
out compare equal. What a PUT, ``apply`` and its dry run decide "unchanged" by."""

from __future__ import annotations

import msgspec
import msgspec.inspect


def plain(value: object) -> object:
    """A Struct as builtins with every field equal to its default left out, recursively:
    two definitions that mean the same compare equal however they were spelled
    (``"timeout_s": 3600`` given or not). msgspec's ``omit_defaults`` cannot say this: it
    leaves out a default only when it is the very default object."""
    if isinstance(value, msgspec.Struct):
        out = {}
        for field in msgspec.structs.fields(value):
            item = getattr(value, field.name)
            if field.default is not msgspec.NODEFAULT:
                default: object = field.default
            elif field.default_factory is not msgspec.NODEFAULT:
                default = field.default_factory()
            else:
                default = msgspec.NODEFAULT
            if default is not msgspec.NODEFAULT and item == default:
                continue
            out[field.encode_name] = plain(item)
        info = msgspec.inspect.type_info(type(value))
        if isinstance(info, msgspec.inspect.StructType) and info.tag_field is not None:
            out = {info.tag_field: info.tag, **out}
        return out
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return msgspec.to_builtins(value)


def same_definition(a: msgspec.Struct, b: msgspec.Struct) -> bool:
    """Whether two definitions mean the same (see :func:`plain`)."""
    return plain(a) == plain(b)
