"""Sending one notification message over its channel: a webhook (JSON, HMAC-signed,
with the message id as its idempotency key) or any service apprise knows by URL.

Blocking I/O in a thread (trio.to_thread), bounded by the channel's timeout. A webhook
never goes through a proxy from the environment, follows no redirect and connects only to
addresses core/notify_addresses allows; what could not be reached is recorded as such,
without the reason (the log has it), so a channel cannot scan ports. The answer says
whether to retry: no connection, a 5xx, 408 and 429 are worth another attempt; any other
4xx, a redirect or a refused address is not (the receiver refuses the message itself).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import http.client
import ipaddress
import logging
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any, NamedTuple

import trio

from shardsched._version import __version__
from shardsched.core.notify import Channel
from shardsched.core.notify_addresses import Network, networks_from, refusal

log = logging.getLogger(__name__)

_RETRIED_4XX = (408, 425, 429)
#: What the delivery record says of a webhook that could not be reached, whatever the
#: reason (refused, reset, timed out, no route, a refused address): a channel must not
#: be a port scanner that reports each port's state. The node's log has the reason.
UNREACHED = "could not connect (the node's log says why)"


class Refused(OSError):
    """The address a webhook's host resolves to may not be notified (core/notify_addresses)."""


def _checked_connect(
    allowed: Sequence[Network],
    address: tuple[str, int],
    timeout: float | None = None,
    source_address: tuple[str, int] | None = None,
    *args: Any,
) -> socket.socket:
    """``socket.create_connection``, to an address the policy allows: every address the
    host resolves to is checked before it is connected to (a name may resolve to
    loopback or the metadata endpoint), so a name's answer cannot take it elsewhere."""
    host, port = address
    last: OSError = Refused("no address")
    for family, kind, proto, _, sockaddr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        why = refusal(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), allowed)
        if why is not None:
            last = Refused(why)
            continue
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not None:
                sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not an instruction: it is recorded, never followed (it
    could point anywhere, the refused addresses included)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(allowed: Sequence[Network]) -> urllib.request.OpenerDirector:
    """No proxy from the environment, no redirects, and connections only to addresses
    the policy allows."""
    connect = functools.partial(_checked_connect, allowed)

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(_connection(http.client.HTTPConnection, connect), req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(
                _connection(http.client.HTTPSConnection, connect),
                req,
                context=self._context,  # type: ignore[attr-defined]
            )

    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}), Http(), Https(), _NoRedirects()
    )


def _connection(kind: Any, connect: Any) -> Any:
    def make(host: str, **kwargs: Any) -> Any:
        conn = kind(host, **kwargs)
        conn._create_connection = connect
        return conn

    return make


class Sent(NamedTuple):
    ok: bool
    retry: bool  #: not ok: whether another attempt may succeed
    answer: str  #: what the receiver said, for the delivery record


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``v1=`` and the hex HMAC-SHA256 of ``<timestamp>.<body>`` under the secret: what a
    receiver recomputes to know the message is ours and recent."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def webhook_headers(channel: Channel, msg_id: str, attempt: int, body: bytes) -> dict[str, str]:
    timestamp = str(int(time.time()))
    headers = {
        **channel.headers,
        "Content-Type": "application/json",
        "User-Agent": f"shardsched/{__version__}",
        "Idempotency-Key": msg_id,
        "X-Shardsched-Message": msg_id,
        "X-Shardsched-Attempt": str(attempt),
        "X-Shardsched-Timestamp": timestamp,
    }
    if channel.secret:
        headers["X-Shardsched-Signature"] = signature(channel.secret, timestamp, body)
    return headers


def _post(
    url: str, body: bytes, headers: dict[str, str], timeout: float, allowed: Sequence[Network]
) -> Sent:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _opener(allowed).open(request, timeout=timeout) as response:
            response.read(4096)
            return Sent(True, False, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        code = exc.code
        exc.close()  # it holds the connection: closed now, not whenever it is collected
        if 300 <= code < 400:
            return Sent(False, False, f"HTTP {code}: redirects are not followed")
        return Sent(False, code >= 500 or code in _RETRIED_4XX, f"HTTP {code}")
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        # whatever is not an HTTP answer (a refused or silent port, a service that greets
        # first, whose banner http.client would quote) reads the same: no scanner
        reason = getattr(exc, "reason", exc)
        log.warning("webhook %s: %s: %s", _origin(url), type(reason).__name__, reason)
        if isinstance(reason, Refused):
            return Sent(False, False, f"refused: {reason}")
        return Sent(False, True, UNREACHED)


def _origin(url: str) -> str:
    """A URL's scheme and host, for a log line (its path and query may hold a secret)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or ''}"


def _apprise(url: str, title: str, text: str, allowed: Sequence[Network] = ()) -> Sent:
    try:
        import apprise
    except ImportError:
        return Sent(False, False, "apprise is not installed: pip install 'shardsched[notify]'")
    if (why := _name_refusal(url, allowed)) is not None:
        return Sent(False, False, f"refused: {why}")
    try:
        sender = apprise.Apprise()
        if not sender.add(url):
            return Sent(False, False, "apprise does not know this url")
        if sender.notify(title=title, body=text):
            return Sent(True, False, "sent")
    except Exception as exc:  # a plugin's bug must not end the node
        return Sent(False, True, f"apprise: {type(exc).__name__}: {exc}"[:300])
    return Sent(False, True, "apprise could not send it (see the node's log)")


def _name_refusal(url: str, allowed: Sequence[Network]) -> str | None:
    """Why an apprise URL's host may not be notified: apprise's plugins connect by
    themselves, so each address its host resolves to now is checked first (a name that
    does not resolve is the plugin's to fail on; a token in the host's place resolves to
    nothing). Checked before each send, not pinned: a name that changes its answer
    between the two is the limit of this check (docs/security.md)."""
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        return None
    if not host:
        return None
    try:
        found = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    for *_, sockaddr in found:
        why = refusal(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), allowed)
        if why is not None:
            return why
    return None


async def send(channel: Channel, msg_id: str, attempt: int, body: bytes, doc: Any) -> Sent:
    """Deliver one message (``body`` its JSON, ``doc`` the same decoded) once; whatever
    goes wrong is an answer, never an exception (a channel must not end the node)."""
    try:
        return await _send(channel, msg_id, attempt, body, doc)
    except Exception as exc:
        return Sent(False, True, f"{type(exc).__name__}: {exc}"[:300])


async def _send(channel: Channel, msg_id: str, attempt: int, body: bytes, doc: Any) -> Sent:
    if channel.kind == "webhook":
        headers = webhook_headers(channel, msg_id, attempt, body)
        return await trio.to_thread.run_sync(
            _post,
            channel.url,
            body,
            headers,
            channel.timeout_s,
            networks_from(os.environ),
            abandon_on_cancel=True,
        )
    with trio.move_on_after(channel.timeout_s * 3) as scope:
        return await trio.to_thread.run_sync(
            _apprise,
            channel.url,
            doc["title"],
            doc["text"],
            networks_from(os.environ),
            abandon_on_cancel=True,
        )
    assert scope.cancelled_caught
    return Sent(False, True, "timed out")
