"""The HTTP plumbing of the API: the error shape, bodies read with a size cap and decoded
by their Struct, query strings, and running an operation off the event loop. Every
handler of :mod:`.app` answers through these, so every error looks the same.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

import msgspec
import trio
from msgspec import UNSET
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from shardsched.core.errors import Forbidden, RedisUnavailable, ValidationError
from shardsched.core.field_errors import field_error
from shardsched.core.instants import to_ms
from shardsched.core.labels import parse_label_filter
from shardsched.core.validation import MAX_JSON_DEPTH, nests_deeper
from shardsched.ops.pagination import Cursor, parse_cursor
from shardsched.router.schemas import opt
from shardsched.router.server import read_timeout_s
from shardsched.store.redis import RedisConnectionError, RedisNotDurable

log = logging.getLogger(__name__)
MAX_BODY = 1024 * 1024
_encoder = msgspec.json.Encoder()
#: The instants a query may name: the ledger counts milliseconds since 1970 (a stream id
#: cannot be negative), and no schedule reaches past 9999.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_INSTANT = datetime(9999, 12, 31, tzinfo=UTC)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def encode(body: Any) -> bytes:
    return _encoder.encode(body)


def json_response(body: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(body), status_code=status, media_type="application/json")


#: Seconds a client is told to wait when Redis refuses writes or cannot be reached.
RETRY_AFTER_S = 1


def error_response(err: ApiError) -> Response:
    body = {"error": {"code": err.code, "message": err.message, "details": err.details}}
    response = json_response(body, err.status)
    if err.status == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    elif err.status in (408, 413):  # the rest of that body may still come: start afresh
        response.headers["Connection"] = "close"  # so a keep-alive client knows
    elif err.status == 401 and err.code in ("bad_signature", "stale_signature"):
        # a hook's sender signs its request: no token would do (docs/events.md)
        response.headers["WWW-Authenticate"] = 'Shardsched-Signature realm="hook"'
    elif err.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="shardsched"'
    return response


def invalid(exc: msgspec.ValidationError, document: Any = None, schema: Any = None) -> ApiError:
    """A 422 for a validation error, its field named as every surface names it
    (core/field_errors.py; with the document and its schema, a map's key too)."""
    err = field_error(exc, document, schema)
    return validation(err.message, err.field)


def validation(message: str, field: str | None = None) -> ApiError:
    """A 422 naming the offending field as a $.path, its message said plainly."""
    field = field or "$"
    if "x00]*$'" in message:  # models._NO_NUL's pattern: say it plainly
        message = "may not hold a NUL byte"
    elif "matching regex '^[^\\x00" in message:  # models.Name's pattern: say it plainly
        message = re.sub(
            r"Expected `str` matching regex '.*?'",
            "text people read (a name, a reason) may not hold control or invisible format"
            " characters",
            message,
        )
    elif "(?!SHARDSCHED_)" in message:  # models.EnvName's pattern: say it plainly
        message = (
            "an env name is a shell name (letters, digits, _), not SHARDSCHED_*, and not one"
            " the loader, libc, shells or language runtimes act on (LD_*, PYTHON*, BASH_ENV,"
            " IFS, ...: see docs/security.md)"
        )
    return ApiError(422, "validation_error", message, {"field": field})


async def decode(request: Request, decoder: msgspec.json.Decoder[Any]) -> Any:
    return decode_bytes(await read_body(request), decoder)


async def read_raw(request: Request, limit: int) -> bytes:
    """The body as it came: a 413 as soon as it passes ``limit``, a 408 when it stalls for
    the connection's read timeout."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError(413, "body_too_large", f"request body over {limit} bytes")
    idle_s = read_timeout_s(request.scope)
    body = b""
    async with aclosing(request.stream()) as chunks:
        while True:
            with trio.move_on_after(idle_s) as waited:
                chunk = await anext(chunks, None)
            if waited.cancelled_caught:
                raise ApiError(408, "request_timeout", f"the request body stalled for {idle_s:g} s")
            if chunk is None:
                return body
            body += chunk
            if len(body) > limit:
                raise ApiError(413, "body_too_large", f"request body over {limit} bytes")


async def read_body(request: Request) -> bytes:
    """The body, refused with a 413 as soon as it passes MAX_BODY, with a 408 when the
    client sends none of it for the connection's read timeout (a body stalled half-way),
    and with a 415 unless it is ``application/json``: a browser's cross-site "simple"
    request (a form, ``text/plain``) cannot be JSON, so no page a user visits can post a
    job."""
    body = await read_raw(request, MAX_BODY)
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if body and kind != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            f"a request body must be application/json, not {kind or 'untyped'}",
        )
    return body


def decode_bytes(body: bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
    if nests_deeper(body, MAX_JSON_DEPTH):
        raise ApiError(
            422,
            "validation_error",
            f"the body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels",
            {"field": "$", "max_depth": MAX_JSON_DEPTH},
        )
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        try:
            document = msgspec.json.decode(body)
        except msgspec.DecodeError:
            document = None
        raise invalid(exc, document, decoder.type) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, "malformed_json", f"body is not valid JSON: {exc}") from None


class NoBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of a POST that takes none: empty, or ``{}``; any field is a 422."""


_no_body_decoder = msgspec.json.Decoder(NoBody)


async def optional_body(request: Request, decoder: msgspec.json.Decoder[Any]) -> Any:
    """A body that may be absent (None) or else decodes like every other body."""
    body = await read_body(request)
    return decode_bytes(body, decoder) if body.strip() else None


async def no_body(request: Request) -> None:
    """Decode a body that must be empty (or ``{}``) like every other body."""
    body = await read_body(request)
    if body.strip():
        decode_bytes(body, _no_body_decoder)


def query(request: Request, schema: type[Any]) -> Any:
    """The query string decoded into its Struct; a 422 names a bad or unknown parameter."""
    items = request.query_params.multi_items()
    names = [name for name, _ in items]
    for name in names:
        if names.count(name) > 1:
            raise validation(f"query parameter {name!r} is given more than once", f"$.{name}")
    try:
        decoded = msgspec.convert(dict(items), schema, strict=False)
    except msgspec.ValidationError as exc:
        raise invalid(exc) from None
    for name in getattr(schema, "__struct_fields__", ()):
        value = getattr(decoded, name)
        if isinstance(value, datetime) and not EPOCH <= value <= LAST_INSTANT:
            raise validation(
                f"{name} must lie between {EPOCH:%Y-%m-%d} and {LAST_INSTANT:%Y-%m-%d}",
                f"$.{name}",
            )
    return decoded


def cursor(query: Any) -> tuple[Cursor | None]:
    try:
        return (parse_cursor(opt(query.cursor)),)
    except ValidationError as exc:
        raise validation(exc.message, exc.field) from None


def if_match(request: Request) -> int | None:
    """The version an ``If-Match`` header expects (``"3"``, ``W/"3"`` or ``3``), if any."""
    raw = request.headers.get("if-match")
    if raw is None:
        return None
    text = raw.strip().removeprefix("W/").strip('"')
    if not text.isdigit():
        raise ApiError(
            422,
            "validation_error",
            f"If-Match takes the version to expect, as GET gives it in ETag (not {raw!r})",
            {"field": "If-Match"},
        )
    return int(text)


def etag(response: Response, version: int) -> Response:
    """The version as the response's ``ETag``, what ``If-Match`` sends back."""
    response.headers["etag"] = f'"{version}"'
    return response


def deprecated(response: Response, what: str) -> Response:
    """Mark an answer to a request that used an old name: ``Deprecation: true`` and a
    ``Warning`` saying what to use instead (the old names go in the next version)."""
    response.headers["deprecation"] = "true"
    response.headers["warning"] = f'299 shardsched "{what}"'
    return response


def ms(when: Any) -> int | None:
    return None if when is None or when is UNSET else to_ms(when)


def guard(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as err:
            return error_response(err)
        except Forbidden as exc:
            return error_response(ApiError(403, "forbidden", str(exc)))
        except ClientDisconnect:  # nobody is left to answer: not an error of ours
            log.debug("%s %s: the client went mid-request", request.method, request.url.path)
            return Response(status_code=400)
        except RedisNotDurable as exc:
            # The durable mode: the change was made, but the replicas do not have it yet
            # (a failover may lose it). Read before writing again.
            return error_response(ApiError(503, "not_durable", str(exc)))
        except (RedisConnectionError, RedisUnavailable) as exc:
            # Nothing was changed (or it will be replayed by the caller): come back later.
            return error_response(ApiError(503, "redis_unavailable", str(exc)))
        except Exception:  # a bug: say so in the error shape, and log it
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(ApiError(500, "internal_error", "internal error (logged)"))

    return endpoint


def route(path: str, **handlers: Callable[[Request], Any]) -> Route:
    """One route per path, dispatching on the method, so a 405 lists every method the path
    has in its Allow header."""
    guarded = {method.upper(): guard(handler) for method, handler in handlers.items()}
    if "GET" in guarded:
        guarded["HEAD"] = guarded["GET"]

    async def endpoint(request: Request) -> Response:
        return await guarded[request.method](request)

    return Route(path, endpoint, methods=list(guarded))


def labels(text: str | msgspec.UnsetType) -> dict[str, str] | None:
    """A list's ``?label=`` filter, or None when there is none."""
    if text is msgspec.UNSET:
        return None
    try:
        return parse_label_filter(text)
    except ValidationError as exc:
        raise validation(exc.message, exc.field) from None
