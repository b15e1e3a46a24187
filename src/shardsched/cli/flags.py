"""Flags several commands share: where Redis is, and how an HTTP API lets callers in."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from shardsched.store.keys import DEFAULT_NAMESPACE


def redis_flags(p: argparse.ArgumentParser, required: bool = True) -> None:
    env = os.environ.get("SHARDSCHED_REDIS_URL")
    p.add_argument(
        "--redis",
        default=env,
        required=required and env is None,
        metavar="URL",
        help="redis:// or rediss://[user@]host:port[/db] (or SHARDSCHED_REDIS_URL); give "
        "the password in SHARDSCHED_REDIS_PASSWORD or --redis-password-file, not here, "
        "where ps shows it",
    )
    p.add_argument(
        "--redis-password-file",
        default=None,
        metavar="PATH",
        help="a file holding the Redis password (or set SHARDSCHED_REDIS_PASSWORD)",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("SHARDSCHED_NAMESPACE", DEFAULT_NAMESPACE),
        help="key prefix of this deployment in Redis (default %(default)s)",
    )
    p.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING, ERROR")
    p.add_argument(
        "--log-format",
        choices=["json", "text"],
        default="json",
        help="one JSON object per line (default), or text",
    )


def http_flags(p: argparse.ArgumentParser) -> None:
    """Who an HTTP API lets in (see the README's Security section)."""
    p.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without tokens (refused unless bound to loopback)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name a loopback-bound API also answers to (repeatable)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin (https://ops.example.com) allowed to call the API (repeatable)",
    )
    p.add_argument(
        "--metrics-auth", action="store_true", help="/metrics wants a token (read scope)"
    )
    p.add_argument("--certfile", default=None, metavar="PEM", help="serve HTTPS with this")
    p.add_argument("--keyfile", default=None, metavar="PEM", help="the certificate's key")


def tls_files(args: argparse.Namespace) -> Any:
    """The HTTPS files the flags name (a TlsFiles), None for plain HTTP."""
    if (args.certfile is None) != (args.keyfile is None):
        raise SystemExit("shardsched: --certfile and --keyfile go together")
    if args.certfile is None:
        return None
    from shardsched.service import TlsFiles

    return TlsFiles(args.certfile, args.keyfile)


def redis_url_with_password(url: str, password_file: str | None, from_argv: bool) -> str:
    """The Redis URL with the password from ``password_file`` or SHARDSCHED_REDIS_PASSWORD
    put in (in this process's memory only). A password already in a URL given on the
    command line works, with a warning: every user of the machine can read argv."""
    parts = urlsplit(url)
    password = None
    if password_file is not None:
        try:
            password = Path(password_file).read_text().strip()
        except OSError as exc:
            raise SystemExit(f"shardsched: --redis-password-file: {exc.strerror}") from None
    elif os.environ.get("SHARDSCHED_REDIS_PASSWORD"):
        password = os.environ["SHARDSCHED_REDIS_PASSWORD"]
    if parts.password is not None:
        if from_argv:
            print(
                "shardsched: warning: the Redis password is in --redis, where ps shows it; "
                "use SHARDSCHED_REDIS_PASSWORD or --redis-password-file",
                file=sys.stderr,
            )
        return url
    if not password:
        return url
    user = quote(unquote(parts.username), safe="") if parts.username else ""
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))
