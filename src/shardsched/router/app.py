"""The HTTP API (``/api/v1``): a thin starlette shell over :mod:`shardsched.ops`.

Stateless: every request routes by id to its shard and runs the same operations (and Lua
scripts) the SDK runs. The routes come from :mod:`.routes`, each row naming the function
that answers it (in its resource's module: :mod:`.jobs`, :mod:`.runs`, :mod:`.dags`, ...),
and every request passes the gate (:mod:`.guards`) first. Bodies are decoded by the
msgspec Structs of :mod:`shardsched.core.models`; anything invalid is answered before a
single write, with the one error shape (:class:`~shardsched.router.schemas.ErrorBody`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from shardsched import ops
from shardsched.core.access import Scope
from shardsched.router import docs, http, status
from shardsched.router.context import Context
from shardsched.router.guards import AccessPolicy, Gate
from shardsched.router.login_links import LoginLinks
from shardsched.router.openapi import openapi_document
from shardsched.router.routes import OPERATIONS
from shardsched.router.ui import Console
from shardsched.runtime.metrics import Metrics
from shardsched.store.redis import Redis

Endpoint = Callable[[Request], Awaitable[Response]]


async def _openapi(request: Request) -> Response:
    return http.json_response(openapi_document())


async def _internal_openapi(request: Request) -> Response:
    """The worker protocol's routes, apart from the public API's."""
    return http.json_response(openapi_document(internal=True))


def create_app(
    redis: Redis,
    dep: ops.Deployment,
    metrics: Metrics | None = None,
    policy: AccessPolicy | None = None,
    login_links: LoginLinks | None = None,
) -> Starlette:
    """The API of a node (whose metrics it exports) or of a router (metrics of its own).
    ``policy``: who may call it (default: a token on every route but health and metrics,
    loopback Host names only); ``login_links``: the console's one-time login codes."""
    cx = Context(redis, dep, metrics or Metrics())
    policy = policy or AccessPolicy()
    gate = Gate(policy, redis, dep)

    def gated(handler: Endpoint, needed: Scope | None) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            request.state.principal = await gate.principal(request, needed)
            return await handler(request)

        return endpoint

    by_path: dict[str, dict[str, Endpoint]] = {}
    for op in OPERATIONS:
        assert op.handler is not None, op.path
        needed = op.needed()
        if op.handler is status.prometheus and policy.metrics_auth:
            needed = Scope.READ
        by_path.setdefault(op.path, {})[op.method] = gated(partial(op.handler, cx), needed)
    routes = [http.route(path, **handlers) for path, handlers in by_path.items()]
    routes.append(http.route("/openapi.json", get=gated(_openapi, None)))
    routes.append(http.route("/internal/openapi.json", get=gated(_internal_openapi, None)))
    routes.append(http.route("/docs", get=gated(docs.docs_page, None)))
    routes.append(http.route("/docs/{name}", get=gated(docs.docs_asset, None)))
    console = Console(gate, login_links)
    routes.append(http.route("/", get=console.root))
    routes.append(http.route("/ui", get=console.root))
    routes.append(http.route("/ui/", get=console.index))
    routes.append(http.route("/ui/login", get=console.login_page, post=console.login))
    routes.append(http.route("/ui/login/{code}", get=console.login_link))
    routes.append(http.route("/ui/logout", post=console.logout))
    routes.append(http.route("/ui/session", get=console.session))
    routes.append(http.route("/ui/assets/{name}", get=console.asset))

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        name = "method_not_allowed" if code == 405 else "not_found"
        response = http.error_response(
            http.ApiError(code, name, f"{request.method} {request.url.path}")
        )
        response.headers.update(getattr(exc, "headers", None) or {})  # 405: Allow
        return response

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
