"""One request of the HTTP SDK as data, and what its answer becomes: a result of the very
type the Redis SDK returns, or the very exception it raises.

A route (:mod:`.routes`) makes an :class:`HttpCall`; a client (:mod:`.sync`, :mod:`.aio`)
sends it, asking :func:`retry_delay` whether and when to send it again, and hands the
answer to :func:`result`. Everything here is transport-free, so the two clients share it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import msgspec

from shardsched.core import errors
from shardsched.core.errors import HttpError

T = TypeVar("T")

#: Methods that change nothing, or change it to the same end when sent twice (RFC 9110).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: Answers that say "not now": the service's Redis refused or it is overloaded.
RETRY_STATUSES = frozenset({429, 503})
#: The longest pause a ``Retry-After`` is honoured for; longer waits are the caller's call.
MAX_RETRY_AFTER_S = 10.0


@dataclass(frozen=True)
class HttpCall(Generic[T]):
    """One API request and how its answer is read.

    ``answer``: the type the JSON answer decodes to; ``read``: from that and the answer's
    headers to the result (default: the decoded answer itself); ``idempotent``: may be
    sent again after a 503 or a broken connection (default: by method, and a POST that
    writes nothing, or carries an idempotency key, says so)."""

    method: str
    path: str
    answer: Any
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    read: Callable[[Any, Mapping[str, str]], T] | None = None
    idempotent: bool | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def retryable(self) -> bool:
        if self.idempotent is not None:
            return self.idempotent
        return self.method in IDEMPOTENT_METHODS

    def content(self) -> bytes | None:
        return None if self.body is None else msgspec.json.encode(self.body)


#: The longest id a path segment carries (ids are far shorter: a run id, ~130).
MAX_SEGMENT = 2048


def segment(text: str, missing: Callable[[str], Exception]) -> str:
    """An id as one path segment (a run id's ':' and anything else escaped). An id no
    object can have, and that a URL cannot carry as one segment (empty, ``.``, ``..``,
    with a ``/``, or longer than any id), raises ``missing(text)`` as the service would
    answer for an unknown id, and nothing is sent."""
    if text in ("", ".", "..") or "/" in text or len(text) > MAX_SEGMENT:
        raise missing(text)
    return quote(text, safe="")


def query(**params: Any) -> dict[str, str]:
    """Query parameters, those left out (None) dropped; instants in ISO 8601."""
    out: dict[str, str] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            out[name] = value.isoformat()
        elif isinstance(value, dict):  # labels: team:payments,tier:gold
            if value:
                out[name] = ",".join(f"{k}:{v}" for k, v in value.items())
        else:
            out[name] = str(getattr(value, "value", value))
    return out


def result(call: HttpCall[T], status: int, body: bytes, headers: Mapping[str, str]) -> T:
    """The result of a 2xx answer, or the exception an error answer stands for."""
    if status >= 400:
        raise error_of(status, body)
    try:
        decoded = None if call.answer is None else msgspec.json.decode(body, type=call.answer)
    except msgspec.DecodeError as exc:
        said = f"the API's answer is not what was asked: {exc}"
        raise HttpError(status, "bad_answer", said) from None
    if call.read is not None:
        return call.read(decoded, headers)
    return cast(T, decoded)


class _ErrorBody(msgspec.Struct):
    code: str
    message: str
    details: Any = None


class _ErrorAnswer(msgspec.Struct):
    error: _ErrorBody


#: The exceptions an error answer's ``details.type`` may name, rebuilt as raised.
_TYPED: dict[str, type[errors.ShardschedError]] = {
    cls.__name__: cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.ShardschedError)
}


def error_of(status: int, body: bytes) -> Exception:
    """The exception the Redis SDK raises for what this error answer says."""
    try:
        err = msgspec.json.decode(body, type=_ErrorAnswer).error
    except msgspec.DecodeError:
        return HttpError(status, "http_error", body[:200].decode(errors="replace"))
    details = err.details if isinstance(err.details, dict) else {}
    if status == 422:
        return errors.ValidationError(err.message, details.get("field"))
    if status == 503 and err.code == "not_durable":  # made, not yet on the replicas
        return errors.Unreachable(err.message)
    if status == 503:
        return errors.RedisUnavailable(err.message)
    if status == 401:
        return errors.Unauthenticated(err.message)
    if status == 403:
        return errors.Forbidden(err.message)
    cls = _TYPED.get(str(details.get("type")))
    if cls is None:
        if status == 404:
            return errors.NotFoundError(err.message)
        if status in (409, 412):
            return errors.ConflictError(err.message)
        return HttpError(status, err.code, err.message, err.details)
    # Rebuilt as the service raised it: its message and its attributes, no constructor
    # (each takes other arguments; what it kept is in the details).
    exc = cls.__new__(cls)
    Exception.__init__(exc, err.message)
    exc.__dict__.update({k: v for k, v in details.items() if k != "type"})
    return exc


def retry_delay(
    attempt: int, retry_after: str | None, base_s: float = 0.2, cap_s: float = 5.0
) -> float:
    """Seconds to wait before sending again (attempt 1 is the first retry): what the
    answer's ``Retry-After`` asks (seconds, at most :data:`MAX_RETRY_AFTER_S`), else an
    exponential backoff with full jitter (AWS's "full jitter": uniform in [0, base·2^n],
    capped), so clients that failed together do not come back together."""
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)
        except ValueError:
            pass  # an HTTP date: rare from us; back off as usual
    return random.uniform(0, min(cap_s, base_s * 2 ** (attempt - 1)))
