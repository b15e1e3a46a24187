"""The OpenAPI 3.1 document of the HTTP API, generated from the msgspec Structs.

The request and response bodies and the query strings are the very Structs the routes
decode and encode (:mod:`shardsched.core.models`, :mod:`shardsched.router.schemas`), so the
document cannot drift from the code; :data:`OPERATIONS` lists each route once with its
body, query, answer and the error statuses it can give.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from shardsched._version import __version__
from shardsched.router.routes import OPERATIONS
from shardsched.router.schemas import ErrorBody

_ERROR_TEXT = {
    400: "The body is not valid JSON, or the HTTP request itself is malformed",
    401: "Missing, unknown or revoked bearer token",
    403: "The token's scopes do not cover this; or a Host or Origin that is not allowed",
    404: "No such resource",
    409: "Conflicts with the current state (deleted, not dead-lettered, a DAG's task…)",
    412: "If-Match names another version than the current one: nothing changed",
    413: "The body is over 1 MiB",
    415: "A body that is not application/json",
    422: "Invalid input; details.field names it as a $.path",
    503: "Redis is unavailable, or (readyz) not every shard is owned",
}
_REF = "#/components/schemas/{name}"


def _json(ref: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": ref}}}


def _not_null(prop: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent or a string, never JSON null: drop that alternative."""
    prop = {k: v for k, v in prop.items() if not (k == "default" and v is None)}
    options = [o for o in prop.pop("anyOf", []) if o != {"type": "null"}]
    if len(options) == 1:
        prop.update(options[0])
    elif options:
        prop["anyOf"] = options
    return prop


@cache
def openapi_document() -> dict[str, Any]:
    """The whole document (computed once per process)."""
    types: list[Any] = [ErrorBody]
    for op in OPERATIONS:
        types += [t for t in (op.answer, op.body, op.query) if t is not None]
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    ref_of = dict(zip(types, refs, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        item: dict[str, Any] = {
            "summary": op.summary,
            "operationId": f"{op.method}_{op.path.strip('/').replace('/', '_')}".replace(
                "{", ""
            ).replace("}", ""),
            "tags": list(op.tags),
            "responses": {
                str(op.status): {
                    "description": op.summary,
                    **(
                        _json(ref_of[op.answer])
                        if op.answer is not None
                        else {"content": {"text/plain": {"schema": {"type": "string"}}}}
                    ),
                }
            },
        }
        needed = op.needed()
        item["security"] = [] if needed is None else [{"bearer": []}]
        if needed is not None:
            item["description"] = f"Needs a token with the `{needed}` scope."
        # 400: the HTTP layer refuses a malformed request (a bad Content-Length, say)
        # before any route sees it, so every operation can answer it
        auth_errors = {400, 403} if needed is None else {400, 401, 403}
        for status in sorted({*op.errors, *auth_errors, 503}):
            item["responses"][str(status)] = {
                "description": _ERROR_TEXT[status],
                **_json(ref_of[ErrorBody] if op.path != "/readyz" else ref_of[op.answer]),
            }
        if op.path == "/readyz":
            item["responses"]["503"]["description"] = "Not every shard is owned by a live node"
        params = [
            {"name": name[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
            for name in op.path.split("/")
            if name.startswith("{")
        ]
        if op.query is not None:
            schema = components[op.query.__name__]
            params += [
                {"name": name, "in": "query", "required": False, "schema": _not_null(prop)}
                for name, prop in schema["properties"].items()
            ]
        if params:
            item["parameters"] = params
        if op.body is not None:
            item["requestBody"] = {"required": True, **_json(ref_of[op.body])}
        paths.setdefault(op.path, {})[op.method] = item
    for query in {op.query for op in OPERATIONS if op.query is not None}:
        components.pop(query.__name__, None)  # described as parameters, not a schema
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "shardsched",
            "version": __version__,
            "description": "A distributed cron and DAG scheduler: the HTTP API (DESIGN §4).",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
