"""Where the API is, which token to send and which CA to trust: what the HTTP SDK and the
CLI read, in one place, so a profile written for the CLI serves a program too.

First found wins:

- the API: the argument, ``SHARDSCHED_API``, ``api`` in the config file,
  http://127.0.0.1:8080;
- the token: the argument, ``SHARDSCHED_TOKEN``, the file a ``token_file`` argument or
  ``SHARDSCHED_TOKEN_FILE`` names, ``token_file`` in the config file, then
  ``.shardsched/token`` (what ``shardsched dev`` writes into its data dir) in the
  current directory;
- the CA file for ``https://``: the argument, ``SHARDSCHED_CA_FILE``, ``ca_file`` in the
  config file, else the system's.

The config file is ``$SHARDSCHED_CONFIG``, or ``$XDG_CONFIG_HOME/shardsched/config.toml``
(``~/.config/shardsched/config.toml``). Profiles name several deployments::

    profile = "dev"            # the default one (else: the top-level settings)
    [profiles.dev]
    api = "http://127.0.0.1:8080"
    [profiles.prod]
    api = "https://sched.example.internal"
    token_file = "~/.config/shardsched/prod.token"
    ca_file = "/etc/ssl/internal-ca.pem"

and a ``profile`` argument (``--profile`` in the CLI) or ``SHARDSCHED_PROFILE`` picks one.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from shardsched.core.errors import ConfigError

DEFAULT_API = "http://127.0.0.1:8080"
DEV_TOKEN = Path(".shardsched") / "token"


class Endpoint(NamedTuple):
    """An API, the token to send it (None: send none) and the CA file to trust (None: the
    system's)."""

    url: str
    token: str | None = None
    ca_file: str | None = None

    def __repr__(self) -> str:  # a token printed in a log is a token leaked
        token = None if self.token is None else "***"
        return f"Endpoint(url={self.url!r}, token={token!r}, ca_file={self.ca_file!r})"


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
        raise ConfigError(f"cannot read the config file {path}: {exc}") from None


def read_token(path: Path) -> str:
    try:
        token = path.expanduser().read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"the token file {path} is empty")
    return token


def _profile(config: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """The settings of one profile (``[profiles.<name>]``) over the file's top level."""
    name = profile or os.environ.get("SHARDSCHED_PROFILE") or config.get("profile")
    if not name:
        return config
    profiles = config.get("profiles") or {}
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ConfigError(f"no profile {name!r} in {config_path()} (profiles: {known})")
    return {**config, **profiles[name]}


def endpoint(
    api: str | None = None,
    token_file: str | None = None,
    profile: str | None = None,
    *,
    token: str | None = None,
    ca_file: str | None = None,
) -> Endpoint:
    """Where to send requests, with which token and CA (see the module's docstring)."""
    config = _profile(_config(), profile)
    url = str(api or os.environ.get("SHARDSCHED_API") or config.get("api") or DEFAULT_API)
    ca = ca_file or os.environ.get("SHARDSCHED_CA_FILE") or config.get("ca_file")
    ca = None if not ca else str(Path(str(ca)).expanduser())
    if token is not None:
        return Endpoint(url, token, ca)
    if from_env := os.environ.get("SHARDSCHED_TOKEN", "").strip():
        return Endpoint(url, from_env, ca)
    named = token_file or os.environ.get("SHARDSCHED_TOKEN_FILE") or config.get("token_file")
    if named:
        return Endpoint(url, read_token(Path(str(named))), ca)
    if DEV_TOKEN.is_file():
        return Endpoint(url, read_token(DEV_TOKEN), ca)
    return Endpoint(url, None, ca)
