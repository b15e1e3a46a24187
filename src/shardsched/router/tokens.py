"""API tokens: create, list, revoke, and the log of who did which (tokens not bound to a
team only)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.access import Scope, TokenCreated, TokenList, TokenLog, TokenRequest
from shardsched.ops.access import tokens
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import unbound, who
from shardsched.router.operation import BODY_ERRORS, Operation
from shardsched.router.schemas import TokenLogQuery

_token_decoder = msgspec.json.Decoder(TokenRequest)


async def create_token(cx: Context, request: Request) -> Response:
    unbound(request)
    body = await http.decode(request, _token_decoder)
    op = tokens.create_token(cx.dep, body, who(request).name)
    return http.json_response(await cx.run(op), 201)


async def list_tokens(cx: Context, request: Request) -> Response:
    unbound(request)
    return http.json_response(await cx.run(tokens.list_tokens(cx.dep)))


async def token_log(cx: Context, request: Request) -> Response:
    unbound(request)
    q: TokenLogQuery = http.query(request, TokenLogQuery)
    return http.json_response(await cx.run(tokens.token_log(cx.dep, q.limit)))


async def revoke_token(cx: Context, request: Request) -> Response:
    unbound(request)
    name = request.path_params["name"]
    op = tokens.revoke_token(cx.dep, name, who(request).name)
    return http.json_response(await cx.run(op))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/tokens",
        "Create an API token (its secret is shown once)",
        TokenCreated,
        201,
        TokenRequest,
        errors=(*BODY_ERRORS, 409),
        tags=("tokens",),
        handler=create_token,
        scope=Scope.ADMIN,
    ),
    Operation(
        "get",
        "/api/v1/tokens",
        "API tokens (names, scopes, teams; never a secret)",
        TokenList,
        tags=("tokens",),
        handler=list_tokens,
        scope=Scope.ADMIN,
    ),
    Operation(
        "get",
        "/api/v1/tokens/log",
        "Who made or revoked which token, and when (newest first)",
        TokenLog,
        query=TokenLogQuery,
        tags=("tokens",),
        handler=token_log,
        scope=Scope.ADMIN,
    ),
    Operation(
        "delete",
        "/api/v1/tokens/{name}",
        "Revoke a token by name or by the SHA-256 of its secret: refused on its next request",
        None,
        errors=(404,),
        tags=("tokens",),
        handler=revoke_token,
        scope=Scope.ADMIN,
    ),
)
