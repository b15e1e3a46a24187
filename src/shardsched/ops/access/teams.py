"""Which jobs and DAGs a team's token may see: the owner's name of any id, checked.

A token bound to name prefixes sees a job, a DAG, their runs and DAG runs only when the
owning job's or DAG's name starts with one of them. Anything else answers exactly as an
id that does not exist (404, not 403), so a team cannot even learn another's ids.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from shardsched.core.access import Principal
from shardsched.core.errors import Forbidden, NotFoundError
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.keys import owner_id


class _Named(msgspec.Struct):
    name: str


_named = msgspec.json.Decoder(_Named)


def spec_name(spec: bytes | None) -> str | None:
    """The ``name`` of a stored job or DAG spec (None: no such job or DAG)."""
    if spec is None:
        return None
    try:
        return _named.decode(spec).name
    except msgspec.DecodeError:
        return None


def owner_name(dep: Deployment, any_id: str) -> Op:
    """The name of the job or DAG an id belongs to; None when it does not exist."""
    owner = owner_id(any_id)
    (raw,) = yield [Call(("HGET", dep.keys_for(owner).job(owner), "spec"))]
    return spec_name(check(raw))


def require_visible(dep: Deployment, who: Principal, any_id: str, missing: NotFoundError) -> Op:
    """Raise ``missing`` (the very 404 of an unknown id) unless ``who`` sees ``any_id``.
    Free for an unbound token: no round trip."""
    if not who.bound:
        return
    name = yield from owner_name(dep, any_id)
    if name is None or not who.sees(name):
        raise missing


def require_free_or_own(dep: Deployment, who: Principal, any_id: str, missing: NotFoundError) -> Op:
    """Raise ``missing`` when ``any_id`` belongs to a job or DAG ``who`` does not see: a
    put by a team's token may take a free id or its own, and meets another team's exactly
    as an unknown id elsewhere. Free for an unbound token."""
    if not who.bound:
        return
    name = yield from owner_name(dep, any_id)
    if name is not None and not who.sees(name):
        raise missing


def require_name(who: Principal, name: str) -> None:
    """A create or rename by a team's token must stay within its prefixes (403: the name
    is the caller's own, so saying no leaks nothing)."""
    if not who.sees(name):
        allowed = ", ".join(repr(p) for p in who.prefixes)
        raise Forbidden(f"token {who.name!r} may only name jobs and DAGs {allowed}…")


def require_keys(who: Principal, keys: Iterable[tuple[str | None, str]]) -> None:
    """A team's jobs and DAG tasks may name only the team's concurrency keys: each key
    (a template too) must start with one of the token's prefixes, as a name must, so one
    team's job can neither take another's slots nor set the limit its jobs share (403,
    naming the field; ``keys``: (key or None, its $.path)). Free for an unbound token."""
    if not who.bound:
        return
    for key, path in keys:
        if key is not None and not key.startswith(who.prefixes):
            allowed = ", ".join(repr(p) for p in who.prefixes)
            raise Forbidden(f"token {who.name!r} may only use concurrency keys {allowed}… ({path})")


def visible_key(who: Principal, key: str) -> bool:
    """Whether ``who`` sees concurrency key ``key``: every key for an unbound token, its
    own team's (by prefix) for a team's."""
    return not who.bound or key.startswith(who.prefixes)
