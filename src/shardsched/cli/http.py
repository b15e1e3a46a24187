"""The CLI's HTTP client: one request to the API with the standard library, its error
answer turned into a one-line :class:`CliError`.

Where the API is and which token to send, first found wins:

- the API: ``--api``, ``SHARDSCHED_API``, ``api`` in the config file, http://127.0.0.1:8080;
- the token: ``SHARDSCHED_TOKEN``, the file ``--token-file`` or ``SHARDSCHED_TOKEN_FILE``
  names, ``token_file`` in the config file, then ``.shardsched/token`` (what
  ``shardsched dev`` writes into its data dir) in the current directory.

The config file is ``$SHARDSCHED_CONFIG``, or ``$XDG_CONFIG_HOME/shardsched/config.toml``
(``~/.config/shardsched/config.toml``). A token is never a flag: argv is public to
every user of the machine (``ps``). Profiles name several deployments::

    profile = "dev"            # the default one (else: the top-level settings)
    [profiles.dev]
    api = "http://127.0.0.1:8080"
    [profiles.prod]
    api = "https://sched.example.internal"
    token_file = "~/.config/shardsched/prod.token"

and ``--profile prod`` (or ``SHARDSCHED_PROFILE=prod``) picks one.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any, NamedTuple

DEFAULT_API = "http://127.0.0.1:8080"
DEV_TOKEN = Path(".shardsched") / "token"


class CliError(Exception):
    """A one-line message for stderr."""


class Endpoint(NamedTuple):
    """An API and the token to send it (None: send none)."""

    url: str
    token: str | None = None


def config_path() -> Path:
    if explicit := os.environ.get("SHARDSCHED_CONFIG"):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "shardsched" / "config.toml"


def _config() -> dict[str, Any]:
    path = config_path()
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CliError(f"cannot read the config file {path}: {exc}") from None


def _read_token(path: Path) -> str:
    try:
        token = path.expanduser().read_text().strip()
    except OSError as exc:
        raise CliError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise CliError(f"the token file {path} is empty")
    return token


def _profile(config: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """The settings of one profile (``[profiles.<name>]``) over the file's top level; the
    profile is ``--profile``, ``SHARDSCHED_PROFILE`` or the file's ``profile``."""
    name = profile or os.environ.get("SHARDSCHED_PROFILE") or config.get("profile")
    if not name:
        return config
    profiles = config.get("profiles") or {}
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise CliError(f"no profile {name!r} in {config_path()} (profiles: {known})")
    return {**config, **profiles[name]}


def endpoint(api: str | None, token_file: str | None, profile: str | None = None) -> Endpoint:
    """Where to send requests and with which token (see the module's docstring)."""
    config = _profile(_config(), profile)
    url = api or os.environ.get("SHARDSCHED_API") or config.get("api") or DEFAULT_API
    if token := os.environ.get("SHARDSCHED_TOKEN", "").strip():
        return Endpoint(str(url), token)
    named = token_file or os.environ.get("SHARDSCHED_TOKEN_FILE") or config.get("token_file")
    if named:
        return Endpoint(str(url), _read_token(Path(str(named))))
    if DEV_TOKEN.is_file():
        return Endpoint(str(url), _read_token(DEV_TOKEN))
    return Endpoint(str(url))


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
        with urllib.request.urlopen(req, timeout=30) as reply:
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

    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        why = " ".join(str(exc).split())
        raise CliError(f"{source} is neither JSON ({json_error}) nor YAML ({why})") from None
    if not isinstance(body, dict):
        raise CliError(f"{source}: expected a JSON or YAML mapping")
    return body
