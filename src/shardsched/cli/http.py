"""The CLI's HTTP client: one request to ``--api`` with the standard library, its error
answer turned into a one-line :class:`CliError`."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

DEFAULT_API = "http://127.0.0.1:8080"


class CliError(Exception):
    """A one-line message for stderr."""


def request(api: str, method: str, path: str, body: Any = None) -> Any:
    """One API call; raises CliError with the API's error message (or why it failed)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        api.rstrip("/") + path,
        data=data,
        method=method,
        headers={"content-type": "application/json"} if data is not None else {},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())["error"]
        except (ValueError, KeyError, TypeError):
            raise CliError(f"{method} {path}: HTTP {exc.code}") from None
        field = (error.get("details") or {}).get("field")
        where = f" (at {field})" if field else ""
        raise CliError(f"{error['code']}: {error['message']}{where}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(f"cannot reach the API at {api}: {reason}") from None
