"""Flags several commands share: where Redis is, and how an HTTP API lets callers in."""

from __future__ import annotations

import argparse
import os

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
