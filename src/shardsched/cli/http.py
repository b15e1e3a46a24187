"""The CLI's HTTP client: one request to the API with the standard library, its error
answer turned into a one-line :class:`CliError`.

Where the API is, which token to send and which CA to trust is found as the HTTP SDK
finds it (:mod:`shardsched.sdk.http.settings`: flags, then ``SHARDSCHED_API``,
``SHARDSCHED_TOKEN``, ``SHARDSCHED_TOKEN_FILE``, ``SHARDSCHED_CA_FILE``, then the config
file's profile, then ``.shardsched/token``). A token is never a flag: argv is public to
every user of the machine (``ps``).
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from email.message import Message
from typing import Any

from shardsched.core.errors import ConfigError
from shardsched.sdk.http import settings
from shardsched.sdk.http.settings import DEFAULT_API, Endpoint, config_path

__all__ = ["DEFAULT_API", "CliError", "Endpoint", "config_path", "endpoint", "request"]


class CliError(Exception):
    """A one-line message for stderr."""


def endpoint(api: str | None, token_file: str | None, profile: str | None = None) -> Endpoint:
    """Where to send requests and with which token (see the module's docstring)."""
    try:
        return settings.endpoint(api, token_file, profile)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def request(api: Endpoint, method: str, path: str, body: Any = None) -> Any:
    """One API call; raises CliError with the API's error message (or why it failed)."""
    return exchange(api, method, path, body)[0]


def exchange(
    api: Endpoint,
    method: str,
    path: str,
    body: Any = None,
    extra: dict[str, str] | None = None,
) -> tuple[Any, Message]:
    """One API call with ``extra`` request headers; its JSON answer and its headers."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"} if data is not None else {}
    headers.update(extra or {})
    if api.token is not None:
        headers["authorization"] = f"Bearer {api.token}"
    req = urllib.request.Request(api.url.rstrip("/") + path, data=data, method=method)
    for name, value in headers.items():
        req.add_header(name, value)
    try:
        context = None if api.ca_file is None else ssl.create_default_context(cafile=api.ca_file)
        with urllib.request.urlopen(req, timeout=30, context=context) as reply:
            return json.loads(reply.read()), reply.headers
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())["error"]
        except (ValueError, KeyError, TypeError):
            raise CliError(f"{method} {path}: HTTP {exc.code}") from None
        field = (error.get("details") or {}).get("field")
        where = f" (at {field})" if field else ""
        hint = ""
        if exc.code == 401:
            hint = " (set SHARDSCHED_TOKEN, or --token-file; see shardsched tokens --help)"
        raise CliError(f"{error['code']}: {error['message']}{where}{hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(f"cannot reach the API at {api.url}: {reason}") from None


def read_body(source: str) -> Any:
    """A request body from a JSON or YAML file (as ``apply`` and ``edit`` read them), or
    stdin for ``-``."""
    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        json_error = exc
    import yaml

    from shardsched.runtime import yaml12

    try:
        body = yaml12.load(text)
    except yaml.YAMLError as exc:
        why = " ".join(str(exc).split())
        raise CliError(f"{source} is neither JSON ({json_error}) nor YAML ({why})") from None
    if not isinstance(body, dict):
        raise CliError(f"{source}: expected a JSON or YAML mapping")
    return body
