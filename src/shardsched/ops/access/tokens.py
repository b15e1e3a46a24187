"""API tokens: create, list, revoke, and look one up for a request.

Lookups read Redis on every request (one HGET): a revoked token is refused by the next
request of every router, with no cache to expire and no restart.
"""

from __future__ import annotations

import msgspec

from shardsched.core.access import (
    TokenCreated,
    TokenInfo,
    TokenList,
    TokenLog,
    TokenRecord,
    TokenRequest,
    new_token,
    principal_of,
    token_hash,
)
from shardsched.core.errors import ConflictError, NotFoundError
from shardsched.core.instants import from_ms
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import tokens as tokens_lua
from shardsched.store.records import token_act_from_entry

_record_decoder = msgspec.json.Decoder(TokenRecord)


def _info(record: TokenRecord) -> TokenInfo:
    return TokenInfo(
        name=record.name,
        scopes=record.scopes,
        prefixes=record.prefixes,
        created_at=from_ms(record.created_at),
        created_by=record.created_by,
    )


def create_token(dep: Deployment, request: TokenRequest, created_by: str) -> Op:
    """A new token; the answer holds its secret, shown this once."""
    secret = new_token()
    record = TokenRecord(
        name=request.name,
        scopes=sorted(set(request.scopes)),
        prefixes=sorted(set(request.prefixes)),
        created_at=0,
        created_by=created_by,
    )
    grants = ",".join(record.scopes) + (
        " for " + ",".join(record.prefixes) + "*" if record.prefixes else ""
    )
    call = tokens_lua.create_token(
        dep.globals,
        request.name,
        token_hash(secret),
        msgspec.json.encode(record),
        created_by,
        grants,
    )
    (reply,) = yield [call]
    now = tokens_lua.decode_created(check(reply))
    if now is None:
        raise ConflictError(f"a token named {request.name!r} exists")
    info = _info(msgspec.structs.replace(record, created_at=now))
    return TokenCreated(**msgspec.structs.asdict(info), token=secret)


def list_tokens(dep: Deployment) -> Op:
    """Every token, by name (never a secret or its hash)."""
    (reply,) = yield [Call(("HGETALL", dep.globals.tokens))]
    flat = check(reply)
    records = [
        _record_decoder.decode(flat[i + 1])
        for i in range(0, len(flat), 2)
        if flat[i].startswith(b"h:")
    ]
    return TokenList(tokens=[_info(r) for r in sorted(records, key=lambda r: r.name)])


def revoke_token(dep: Deployment, which: str, by: str) -> Op:
    """Revoke a token by its name or the SHA-256 of its secret (``by``: who, for the log)."""
    if not (yield from forget_token(dep, which, by)):
        raise NotFoundError(f"token {which!r} not found")
    return {"revoked": which}


def forget_token(dep: Deployment, which: str, by: str) -> Op:
    """Revoke a token by name (or hash) if it exists; whether it did."""
    (reply,) = yield [tokens_lua.revoke_token(dep.globals, which, by)]
    return bool(check(reply))


def token_log(dep: Deployment, limit: int = 100) -> Op:
    """Who made or revoked which token, newest first (never a secret or its hash)."""
    (reply,) = yield [Call(("XREVRANGE", dep.globals.tokenlog, "+", "-", "COUNT", limit))]
    acts = []
    for entry_id, fields in check(reply):
        acts.append(token_act_from_entry(entry_id, fields))
    return TokenLog(acts=acts)


def authenticate(dep: Deployment, token: str) -> Op:
    """The principal a bearer token stands for, or None (unknown or revoked)."""
    (reply,) = yield [Call(("HGET", dep.globals.tokens, "h:" + token_hash(token)))]
    raw = check(reply)
    return None if raw is None else principal_of(_record_decoder.decode(raw))


def has_tokens(dep: Deployment) -> Op:
    """Whether any token exists (``dev`` makes its admin token only on first start)."""
    (reply,) = yield [Call(("HLEN", dep.globals.tokens))]
    return bool(check(reply))
