"""Who may do what: API tokens, their scopes and the team (name prefixes) they are bound to.

Pure rules, shared by the router (which checks every request) and the CLI (which creates
tokens). A token is 256 random bits, shown once; Redis keeps only its SHA-256, so a copy
of the keyspace grants nothing. SHA-256 rather than a slow password hash because a token
has the entropy a password lacks: nobody can guess one by trying hashes.

Scopes nest: ``admin`` covers ``write``, which covers ``read``. ``worker`` stands apart:
it is the ``/internal`` protocol only, and nothing else covers it, so a worker's token
cannot read or change jobs and an admin token cannot pose as a worker.
"""

from __future__ import annotations

import enum
import hashlib
import secrets
from datetime import datetime
from typing import Annotated

import msgspec

#: Who a change is recorded as when no token stands behind it: an SDK client that names no
#: actor, and the scheduler itself (auto-resume).
SDK_ACTOR = "sdk"
SYSTEM_ACTOR = "scheduler"

#: Tokens carry this prefix, so a leaked one is recognisable (and greppable) as ours.
TOKEN_PREFIX = "sst_"


class Scope(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"
    WORKER = "worker"


#: Which scopes each scope also grants.
_COVERS: dict[Scope, frozenset[Scope]] = {
    Scope.READ: frozenset({Scope.READ}),
    Scope.WRITE: frozenset({Scope.READ, Scope.WRITE}),
    Scope.ADMIN: frozenset({Scope.READ, Scope.WRITE, Scope.ADMIN}),
    Scope.WORKER: frozenset({Scope.WORKER}),
}

TokenName = Annotated[str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[\w.@-]+$(?!\n)")]
Prefix = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class TokenRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A token to create: its name (unique), scopes, and optionally the name prefixes of
    the jobs and DAGs it is limited to (a team)."""

    name: TokenName
    scopes: Annotated[list[Scope], msgspec.Meta(min_length=1, max_length=4)]
    prefixes: Annotated[list[Prefix], msgspec.Meta(max_length=100)] = msgspec.field(
        default_factory=list
    )


class TokenRecord(msgspec.Struct, kw_only=True):
    """What Redis keeps of a token (under the hash of its secret)."""

    name: str
    scopes: list[Scope]
    prefixes: list[str] = msgspec.field(default_factory=list)
    created_at: int  #: ms, server clock
    created_by: str


class TokenInfo(msgspec.Struct, kw_only=True):
    """A token as ``tokens list`` shows it: never the secret, never its hash."""

    name: str
    scopes: list[Scope]
    prefixes: list[str]
    created_at: datetime
    created_by: str


class TokenCreated(TokenInfo, kw_only=True):
    """The answer to a create: the one time the secret is shown."""

    token: str


class TokenList(msgspec.Struct):
    tokens: list[TokenInfo]


class TokenAct(msgspec.Struct, kw_only=True):
    """One entry of the token log: a token made or revoked, by whom, when."""

    at: datetime
    action: str  #: created, revoked
    by: str
    name: str
    detail: str | None = None  #: its scopes and prefixes; how a revoke found it


class TokenLog(msgspec.Struct):
    acts: list[TokenAct]


class Principal(msgspec.Struct, frozen=True):
    """Who a request acts as: a token's name, what it may do and which names it sees."""

    name: str
    scopes: frozenset[Scope]
    prefixes: tuple[str, ...] = ()

    @property
    def bound(self) -> bool:
        """True when limited to the jobs and DAGs of some name prefixes (a team)."""
        return bool(self.prefixes)

    def may(self, needed: Scope) -> bool:
        return any(needed in _COVERS[s] for s in self.scopes)

    def sees(self, name: str) -> bool:
        """Whether a job or DAG of this name is this principal's to see and change."""
        return not self.prefixes or name.startswith(self.prefixes)


#: Who a request acts as when the API runs with ``--insecure-no-auth``.
ANONYMOUS = Principal("anonymous", frozenset({Scope.ADMIN, Scope.WORKER}))


def principal_of(record: TokenRecord) -> Principal:
    return Principal(record.name, frozenset(record.scopes), tuple(record.prefixes))


def new_token() -> str:
    """A fresh secret: 256 bits from the OS's CSPRNG."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What Redis stores in place of the secret."""
    return hashlib.sha256(token.encode()).hexdigest()


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    kind, _, value = header.partition(" ")
    value = value.strip()
    if kind.lower() != "bearer" or not value or len(value) > 200:
        return None
    return value
