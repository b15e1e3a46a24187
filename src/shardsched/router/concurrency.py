"""Concurrency keys: every key in use with its limits and holders, and setting or clearing
a key's limits (a team's token sees and names its own keys alone)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.concurrency import KEY, KeyList, KeyView, LimitRequest
from shardsched.ops.access import teams
from shardsched.ops.deployment import concurrency
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import unbound, who
from shardsched.router.operation import BODY_ERRORS, Operation

_limits_decoder = msgspec.json.Decoder(LimitRequest)


def _key(request: Request) -> str:
    """The concurrency key a path names (a 422 for one that cannot be a key)."""
    key: str = request.path_params["key"]
    if not KEY.match(key):
        raise http.validation(
            "not a concurrency key: letters, digits and ._:@=+- (no spaces, slashes or "
            "braces), at most 128, starting with a letter or digit",
            "key",
        )
    return key


async def list_concurrency_keys(cx: Context, request: Request) -> Response:
    """Every key for an unbound token; a team's token sees its own keys alone."""
    listed: KeyList = await cx.run(concurrency.list_keys(cx.dep))
    caller = who(request)
    listed.keys = [k for k in listed.keys if teams.visible_key(caller, k.key)]
    return http.json_response(listed)


async def get_concurrency_key(cx: Context, request: Request) -> Response:
    key = _key(request)
    if not teams.visible_key(who(request), key):  # another team's: as an unused key
        return http.json_response(KeyView(key=key))
    return http.json_response(await cx.run(concurrency.get_key(cx.dep, key)))


async def set_concurrency_limits(cx: Context, request: Request) -> Response:
    unbound(request)
    key = _key(request)
    body = await http.decode(request, _limits_decoder)
    op = concurrency.set_limits(cx.dep, key, body, who(request).name)
    return http.json_response(await cx.run(op))


async def clear_concurrency_limits(cx: Context, request: Request) -> Response:
    unbound(request)
    op = concurrency.clear_limits(cx.dep, _key(request), who(request).name)
    return http.json_response(await cx.run(op))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "get",
        "/api/v1/concurrency",
        "Concurrency keys with limits of their own or runs waiting: limits, running, waiting",
        KeyList,
        tags=("concurrency",),
        handler=list_concurrency_keys,
    ),
    Operation(
        "get",
        "/api/v1/concurrency/{key}",
        "A concurrency key: its limits, runs holding and waiting (with the oldest's lag), changes",
        KeyView,
        errors=(422,),
        tags=("concurrency",),
        handler=get_concurrency_key,
    ),
    Operation(
        "put",
        "/api/v1/concurrency/{key}",
        "Set a key's limit and rate (what is left out is cleared): live, and recorded",
        KeyView,
        body=LimitRequest,
        errors=BODY_ERRORS,
        tags=("concurrency",),
        handler=set_concurrency_limits,
    ),
    Operation(
        "delete",
        "/api/v1/concurrency/{key}",
        "Remove a key's own limits (its jobs' concurrency_limit holds again); recorded",
        KeyView,
        errors=(404, 422),
        tags=("concurrency",),
        handler=clear_concurrency_limits,
    ),
)
