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
import msgspec.inspect as mi

from shardsched._version import __version__
from shardsched.router.operation import Operation
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


def _date_times(info: Any, found: dict[str, set[str]], seen: set[type]) -> None:
    """Struct name -> its fields that hold a datetime (alone, optional, or in a list)."""
    if isinstance(info, mi.StructType):
        if info.cls in seen:
            return
        seen.add(info.cls)
        for f in info.fields:
            if _is_date_time(f.type):
                found.setdefault(info.cls.__name__, set()).add(f.encode_name)
            _date_times(f.type, found, seen)
    elif isinstance(info, mi.UnionType):
        for t in info.types:
            _date_times(t, found, seen)
    elif isinstance(info, mi.ListType):
        _date_times(info.item_type, found, seen)
    elif isinstance(info, mi.DictType):
        _date_times(info.value_type, found, seen)


def _is_date_time(t: Any) -> bool:
    if isinstance(t, mi.DateTimeType):
        return True
    return isinstance(t, mi.UnionType) and any(isinstance(x, mi.DateTimeType) for x in t.types)


def _mark_date_times(components: dict[str, Any], types: list[Any]) -> None:
    """``format: date-time`` on every timestamp (msgspec leaves it out), so a generated
    client parses them as datetimes."""
    found: dict[str, set[str]] = {}
    seen: set[type] = set()
    for info in mi.multi_type_info(types):
        _date_times(info, found, seen)
    for name, fields in found.items():
        props = components.get(name, {}).get("properties", {})
        for field_name in fields:
            prop = props.get(field_name)
            if prop is None:
                continue
            for option in prop.get("anyOf", [prop]):
                if option.get("type") == "string":
                    option["format"] = "date-time"


def operation_id(op: Operation) -> str:
    """``getJob``, ``listRuns``: the handler's name in camelCase (or the row's own)."""
    name = op.name()
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _answers(op: Operation, ref_of: dict[Any, Any]) -> dict[str, Any]:
    if op.answer is None:
        media = "text/event-stream" if op.path.endswith("/stream") else "text/plain"
        content = {"content": {media: {"schema": {"type": "string"}}}}
    else:
        content = _json(ref_of[op.answer])
    answers = {str(op.status): {"description": op.summary, **content}}
    if op.path.endswith("/jobs/{job_id}/trigger"):
        answers["200"] = {"description": "The idempotency key was used: its first run", **content}
    if op.method == "put":  # create or replace
        answers = {
            "200": {"description": "Replaced (or unchanged: see Shardsched-Outcome)", **content},
            "201": {"description": "Created", **content},
        }
    return answers


@cache
def openapi_document(internal: bool = False) -> dict[str, Any]:
    """The public document, or (``internal``) the worker protocol's routes alone
    (computed once per process)."""
    chosen = [op for op in OPERATIONS if op.path.startswith("/internal/") == internal]
    types: list[Any] = [ErrorBody]
    for op in chosen:
        types += [t for t in (op.answer, op.body, op.query) if t is not None]
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    _mark_date_times(components, types)
    ref_of = dict(zip(types, refs, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for op in chosen:
        item: dict[str, Any] = {
            "summary": op.summary,
            "operationId": operation_id(op),
            "tags": list(op.tags),
            "responses": _answers(op, ref_of),
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
            item["requestBody"] = {"required": not op.body_optional, **_json(ref_of[op.body])}
        paths.setdefault(op.path, {})[op.method] = item
    for query in {op.query for op in chosen if op.query is not None}:
        components.pop(query.__name__, None)  # described as parameters, not a schema
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "shardsched" + (" worker protocol" if internal else ""),
            "version": __version__,
            "description": (
                "What a worker speaks over HTTP instead of Redis (claim, renew, complete)."
                if internal
                else "A distributed cron and DAG scheduler: the HTTP API. The worker"
                " protocol's routes are described apart, at /internal/openapi.json."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
