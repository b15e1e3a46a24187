"""What the blocking and the async HTTP client share: the ``httpx`` client's settings
(base URL, token, CA, timeouts) and the rule for sending a call again.

A call is sent again, after :func:`~.calls.retry_delay`, when
- the connection could not be made (nothing was sent: safe for any call), or
- it is retryable (:meth:`~.calls.HttpCall.retryable`: idempotent by method, or a POST
  that writes nothing or carries an idempotency key) and the answer was a 429 or 503 (the
  service's Redis refused, or too many requests were in flight), or the connection broke
  after it was sent;
at most ``retries`` times and :data:`RETRY_BUDGET_S` of pauses in all (a certificate the
CA file does not vouch for is not tried again). A call that is not retryable is never
sent twice: its 503 raises RedisUnavailable and its broken connection Unreachable, and
the caller decides.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from shardsched._version import __version__
from shardsched.core.errors import ConfigError, Unreachable
from shardsched.sdk.http import settings
from shardsched.sdk.http.calls import RETRY_STATUSES, HttpCall, retry_delay

#: Seconds a call may spend waiting between its sends, in all (a ``Retry-After`` of an
#: hour from a proxy must not hang a program for an hour).
RETRY_BUDGET_S = 30.0
#: Seconds to connect, and to wait for an answer (a long list or a big backfill is slow).
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Options:
    """How a client talks to the API: resolved once, when it is made."""

    endpoint: settings.Endpoint
    retries: int
    timeout: httpx.Timeout
    verify: ssl.SSLContext | bool = True

    @classmethod
    def of(
        cls,
        url: str | None,
        token: str | None,
        token_file: str | None,
        profile: str | None,
        ca_file: str | None,
        retries: int,
        timeout_s: float | None,
    ) -> Options:
        if token is not None:
            token = token.strip()  # a token read from a file ends in a newline
            if not token or not token.isascii() or not token.isprintable():
                raise ValueError("a token is printable ASCII text (not empty)")
        endpoint = settings.endpoint(url, token_file, profile, token=token, ca_file=ca_file)
        parts = urlsplit(endpoint.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the API's URL is http(s)://host[:port], not {endpoint.url!r}")
        if parts.username or parts.password:
            raise ValueError("the API's URL holds no user or password: give token= instead")
        # the API's root, also when given as dev prints it (http://127.0.0.1:8080/api/v1)
        root = endpoint.url.rstrip("/").removesuffix("/api/v1")
        verify: ssl.SSLContext | bool = True
        if endpoint.ca_file is not None:
            try:
                verify = ssl.create_default_context(cafile=endpoint.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"cannot use the CA file {endpoint.ca_file}: {exc}") from None
        timeout = httpx.Timeout(timeout_s or READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        return cls(endpoint._replace(url=root), max(0, retries), timeout, verify)

    def client_kwargs(self) -> dict[str, Any]:
        """What ``httpx.Client`` / ``httpx.AsyncClient`` are made with."""
        headers = {"user-agent": f"shardsched-sdk/{__version__}"}
        if self.endpoint.token is not None:
            headers["authorization"] = f"Bearer {self.endpoint.token}"
        return {
            "base_url": self.endpoint.url.rstrip("/"),
            "headers": headers,
            "timeout": self.timeout,
            "verify": self.verify,
            "follow_redirects": False,
        }

    def request_kwargs(self, call: HttpCall[Any]) -> dict[str, Any]:
        headers = dict(call.headers)
        content = call.content()
        if content is not None:
            headers["content-type"] = "application/json"
        return {"params": call.query, "content": content, "headers": headers}


def pause_after(
    options: Options,
    call: HttpCall[Any],
    attempt: int,
    outcome: httpx.Response | Exception,
    spent_s: float,
) -> float | None:
    """Seconds to wait before sending ``call`` again after ``outcome`` (the answer, or
    what broke), ``spent_s`` into it, or None: do not send it again (the retries are
    spent, the pause would pass :data:`RETRY_BUDGET_S`, or it may not be resent)."""
    if attempt > options.retries:
        return None
    pause: float | None = None
    if isinstance(outcome, httpx.Response):
        if outcome.status_code in RETRY_STATUSES and call.retryable():
            pause = retry_delay(attempt, outcome.headers.get("retry-after"))
    elif _refused_certificate(outcome):
        pause = None  # the same certificate again: no
    elif isinstance(outcome, httpx.ConnectError | httpx.ConnectTimeout) or (
        isinstance(outcome, httpx.TransportError) and call.retryable()
    ):
        pause = retry_delay(attempt, None)
    if pause is None or spent_s + pause > RETRY_BUDGET_S:
        return None
    return pause


def _refused_certificate(exc: Exception) -> bool:
    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY" in str(exc)


def unreachable(options: Options, call: HttpCall[Any], exc: Exception) -> Unreachable:
    said = str(exc) or type(exc).__name__
    return Unreachable(
        f"{call.method} {call.path}: cannot reach the API at {options.endpoint.url}: {said}"
    )
