"""Wrappers of the token scripts: create and revoke an API token atomically (its record
under the hash of its secret, and its name, in one HASH)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from shardsched.store.calls import Call
from shardsched.store.keys import GlobalKeys
from shardsched.store.lua import signature


class Created(enum.IntEnum):
    OK = 1
    NAME_TAKEN = -1


CREATE_TOKEN = signature("create_token", keys=("tokens",), argv=("name", "sha", "record"))


def create_token(gk: GlobalKeys, name: str, sha: str, record: bytes) -> Call:
    """Store a token; ``record`` is its JSON with ``"created_at":0`` for the server's clock.
    Decode with :func:`decode_created`."""
    return CREATE_TOKEN.call((gk.tokens,), (name, sha, record))


def decode_created(reply: Sequence[Any]) -> int | None:
    """The server's clock (ms) at creation, or None when the name is taken."""
    return None if reply[0] == Created.NAME_TAKEN else int(reply[1])


REVOKE_TOKEN = signature("revoke_token", keys=("tokens",), argv=("name",))


def revoke_token(gk: GlobalKeys, name: str) -> Call:
    """Remove a token by name; the reply is 1 revoked, 0 no such token."""
    return REVOKE_TOKEN.call((gk.tokens,), (name,))
