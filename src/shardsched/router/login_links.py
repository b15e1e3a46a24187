"""One-time login links for the console (``shardsched dev`` prints one): a short-lived code
in the link is exchanged once for the session cookie, so the token itself is never in a
URL that lives (a shell's history, a browser's, a proxy's log). The codes are kept in the
serving process only, as a digest: a used, expired or unknown code logs no one in."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

#: How long a link works.
LINK_TTL_S = 300.0


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class LoginLinks:
    """The codes issued and not yet used, each for one token."""

    def __init__(self) -> None:
        self._codes: dict[str, tuple[str, float]] = {}

    def issue(self, token: str, ttl_s: float = LINK_TTL_S) -> str:
        """A new code for ``token``, good once, for ``ttl_s`` seconds."""
        code = secrets.token_urlsafe(24)
        self._codes[_digest(code)] = (token, time.monotonic() + ttl_s)
        return code

    def redeem(self, code: str) -> str | None:
        """The token of a valid code, which is then spent; None for any other."""
        now = time.monotonic()
        for key, (_, deadline) in list(self._codes.items()):  # the expired go
            if deadline < now:
                del self._codes[key]
        digest = _digest(code[:100])
        for key in list(self._codes):
            if hmac.compare_digest(key, digest):
                return self._codes.pop(key)[0]
        return None
