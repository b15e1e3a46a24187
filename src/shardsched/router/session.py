"""The dashboard's session: a token given once on the login page, kept in a cookie.

The cookie holds the token itself (``HttpOnly``: no script can read it; ``SameSite=Strict``:
no other site's page sends it; ``Secure`` over HTTPS), so a revoked token ends the session
on the next request, as it does for the API's bearer. The API accepts the cookie where no
``Authorization`` header is sent. A request authenticated by the cookie that changes
something must also carry ``X-CSRF-Token``, a value derived from the token that the page
reads from ``GET /ui/session``: a form on another site can neither send the cookie
(SameSite) nor know the value. The login form is protected by a double-submit value of its
own (a random cookie repeated in a hidden field).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SESSION_COOKIE = "shardsched_session"
LOGIN_COOKIE = "shardsched_login"
CSRF_HEADER = "x-csrf-token"
#: Methods that change nothing: the only ones a cookie alone may call.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: How long a session cookie lives in the browser (the token may be revoked sooner).
SESSION_MAX_AGE_S = 12 * 3600


def csrf_of(token: str) -> str:
    """The CSRF value of a session: derived from its token, so nothing is stored."""
    return hmac.new(token.encode(), b"shardsched-csrf-v1", hashlib.sha256).hexdigest()[:40]


def csrf_ok(token: str, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(csrf_of(token), sent)


def new_login_nonce() -> str:
    return secrets.token_urlsafe(24)


def cookie(name: str, value: str, *, secure: bool, max_age: int, path: str = "/") -> str:
    """A ``Set-Cookie`` value: HttpOnly, SameSite=Strict, Secure over HTTPS."""
    parts = [f"{name}={value}", f"Path={path}", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
