"""Sending one notification message over its channel: a webhook (JSON, HMAC-signed,
with the message id as its idempotency key) or any service apprise knows by URL.

Blocking I/O in a thread (trio.to_thread), bounded by the channel's timeout. A webhook
never goes through a proxy from the environment. The answer says whether to retry: a
timeout, a refused connection, a 5xx, 408 and 429 are worth another attempt; any other
4xx is not (the receiver refuses the message itself).
"""

from __future__ import annotations

import hashlib
import hmac
import time
import urllib.error
import urllib.request
from typing import Any, NamedTuple

import trio

from shardsched._version import __version__
from shardsched.core.notify import Channel

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_RETRIED_4XX = (408, 425, 429)


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


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Sent:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(4096)
            return Sent(True, False, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        code = exc.code
        exc.close()  # it holds the connection: closed now, not whenever it is collected
        return Sent(False, code >= 500 or code in _RETRIED_4XX, f"HTTP {code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Sent(False, True, f"{type(exc).__name__}: {reason}"[:300])


def _apprise(url: str, title: str, text: str) -> Sent:
    try:
        import apprise
    except ImportError:
        return Sent(False, False, "apprise is not installed: pip install 'shardsched[notify]'")
    try:
        sender = apprise.Apprise()
        if not sender.add(url):
            return Sent(False, False, "apprise does not know this url")
        if sender.notify(title=title, body=text):
            return Sent(True, False, "sent")
    except Exception as exc:  # a plugin's bug must not end the node
        return Sent(False, True, f"apprise: {type(exc).__name__}: {exc}"[:300])
    return Sent(False, True, "apprise could not send it (see the node's log)")


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
            _post, channel.url, body, headers, channel.timeout_s, abandon_on_cancel=True
        )
    with trio.move_on_after(channel.timeout_s * 3) as scope:
        return await trio.to_thread.run_sync(
            _apprise, channel.url, doc["title"], doc["text"], abandon_on_cancel=True
        )
    assert scope.cancelled_caught
    return Sent(False, True, "timed out")
