"""What the blocking and the async HTTP client share: the ``httpx`` client's settings
(base URL, token, CA, timeouts) and the rule for sending a call again.

A call is sent again, after :func:`~.calls.retry_delay`, when
- the connection could not be made (nothing was sent: safe for any call), or
- it is retryable (:meth:`~.calls.HttpCall.retryable`: idempotent by method, or a POST
  that writes nothing or carries an idempotency key) and the answer was a 429 or 503 (the
  service's Redis refused, or too many requests were in flight), or the connection broke
  after it was sent;
at most ``retries`` times. A call that is not retryable is never sent twice: its 503
raises RedisUnavailable and its broken connection Unreachable, and the caller decides.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from shardsched._version import __version__
from shardsched.core.errors import Unreachable
from shardsched.sdk.http import settings
from shardsched.sdk.http.calls import RETRY_STATUSES, HttpCall, retry_delay

#: Seconds to connect, and to wait for an answer (a long list or a big backfill is slow).
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Options:
    """How a client talks to the API: resolved once, when it is made."""

    endpoint: settings.Endpoint
    retries: int
    timeout: httpx.Timeout

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
        endpoint = settings.endpoint(url, token_file, profile, token=token, ca_file=ca_file)
        if not endpoint.url.startswith(("http://", "https://")):
            raise ValueError(f"the API's URL is http:// or https://, not {endpoint.url!r}")
        timeout = httpx.Timeout(timeout_s or READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        return cls(endpoint, max(0, retries), timeout)

    def client_kwargs(self) -> dict[str, Any]:
        """What ``httpx.Client`` / ``httpx.AsyncClient`` are made with."""
        headers = {"user-agent": f"shardsched-sdk/{__version__}"}
        if self.endpoint.token is not None:
            headers["authorization"] = f"Bearer {self.endpoint.token}"
        verify: ssl.SSLContext | bool = True
        if self.endpoint.ca_file is not None:
            verify = ssl.create_default_context(cafile=self.endpoint.ca_file)
        return {
            "base_url": self.endpoint.url.rstrip("/"),
            "headers": headers,
            "timeout": self.timeout,
            "verify": verify,
            "follow_redirects": False,
        }

    def request_kwargs(self, call: HttpCall[Any]) -> dict[str, Any]:
        headers = dict(call.headers)
        content = call.content()
        if content is not None:
            headers["content-type"] = "application/json"
        return {"params": call.query, "content": content, "headers": headers}


def pause_after(
    options: Options, call: HttpCall[Any], attempt: int, outcome: httpx.Response | Exception
) -> float | None:
    """Seconds to wait before sending ``call`` again after ``outcome`` (the answer, or
    what broke), or None: do not send it again."""
    if attempt > options.retries:
        return None
    if isinstance(outcome, httpx.Response):
        if outcome.status_code in RETRY_STATUSES and call.retryable():
            return retry_delay(attempt, outcome.headers.get("retry-after"))
        return None
    never_sent = isinstance(outcome, httpx.ConnectError | httpx.ConnectTimeout)
    if never_sent or (isinstance(outcome, httpx.TransportError) and call.retryable()):
        return retry_delay(attempt, None)
    return None


def unreachable(options: Options, call: HttpCall[Any], exc: Exception) -> Unreachable:
    said = str(exc) or type(exc).__name__
    return Unreachable(
        f"{call.method} {call.path}: cannot reach the API at {options.endpoint.url}: {said}"
    )
