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


CREATE_TOKEN = signature(
    "create_token", keys=("tokens", "tokenlog"), argv=("name", "sha", "record", "by", "grants")
)


def create_token(gk: GlobalKeys, name: str, sha: str, record: bytes, by: str, grants: str) -> Call:
    """Store a token and log who made it (``grants``: its scopes and prefixes, as the log
    shows them); ``record`` is its JSON with ``"created_at":0`` for the server's clock.
    Decode with :func:`decode_created`."""
    return CREATE_TOKEN.call((gk.tokens, gk.tokenlog), (name, sha, record, by, grants))


def decode_created(reply: Sequence[Any]) -> int | None:
    """The server's clock (ms) at creation, or None when the name is taken."""
    return None if reply[0] == Created.NAME_TAKEN else int(reply[1])


REVOKE_TOKEN = signature("revoke_token", keys=("tokens", "tokenlog"), argv=("which", "by"))


def revoke_token(gk: GlobalKeys, which: str, by: str) -> Call:
    """Remove a token by name or by the SHA-256 of its secret, and log who did; the reply
    is how many records went (0: no such token)."""
    return REVOKE_TOKEN.call((gk.tokens, gk.tokenlog), (which, by))
