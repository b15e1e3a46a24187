"""Hooks: a name whose signed requests become events (core/events.HookSpec). Put,
read, listed and deleted; a hook's secrets are stored (its signatures are checked with
them) but never answered: a read says how many it has."""

from __future__ import annotations

import msgspec

from shardsched.core.errors import HookNotFound, ValidationError
from shardsched.core.hooks import HookList, HookName, HookSpec, hook_view
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment

_spec_decoder = msgspec.json.Decoder(HookSpec)
_HOOK_NAME = msgspec.json.Decoder(HookName)


def check_name(name: str) -> None:
    try:
        _HOOK_NAME.decode(msgspec.json.encode(name))
    except msgspec.ValidationError:
        raise ValidationError(
            "a hook's name is 1 to 100 letters, digits, '_' and '-', first a letter or digit",
            "$.name",
        ) from None


def put_hook(dep: Deployment, name: str, spec: HookSpec) -> Op:
    """Create or replace the hook (its secrets too); returns (Hook, whether it is new)."""
    check_name(name)
    if spec.idempotency_header is not None and spec.idempotency_field is not None:
        raise ValidationError(
            "a request's key is in a header or a payload field, not both",
            "$.idempotency_field",
        )
    (added,) = yield [Call(("HSET", dep.globals.hooks, name, msgspec.json.encode(spec)))]
    return hook_view(name, spec), bool(check(added))


def read_hook(dep: Deployment, name: str) -> Op:
    """The hook's stored spec, secrets included: for its signatures, never answered."""
    check_name(name)
    (raw,) = yield [Call(("HGET", dep.globals.hooks, name))]
    if check(raw) is None:
        raise HookNotFound(name)
    spec: HookSpec = _spec_decoder.decode(raw)
    return spec


def get_hook(dep: Deployment, name: str) -> Op:
    spec = yield from read_hook(dep, name)
    return hook_view(name, spec)


def list_hooks(dep: Deployment) -> Op:
    (raw,) = yield [Call(("HGETALL", dep.globals.hooks))]
    flat = check(raw)
    pairs = sorted(zip(flat[::2], flat[1::2], strict=True))
    return HookList([hook_view(n.decode(), _spec_decoder.decode(v)) for n, v in pairs])


def delete_hook(dep: Deployment, name: str) -> Op:
    """Delete the hook: its requests are refused from now on (404); returns the Hook it
    was."""
    spec = yield from read_hook(dep, name)
    (n,) = yield [Call(("HDEL", dep.globals.hooks, name))]
    if not check(n):  # deleted meanwhile
        raise HookNotFound(name)
    return hook_view(name, spec)
