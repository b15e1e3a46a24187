"""``shardsched hooks``: put (create or replace, secrets read from files or environment
variables, never from the command line, where ``ps`` shows them), list, show and
delete the signed webhooks whose requests become events (core/events.HookSpec)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from shardsched.cli.http import CliError, request
from shardsched.cli.render import table


def run(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    if args.hooks_command == "list":
        return request(args.api, "GET", "/api/v1/hooks"), _list
    path = f"/api/v1/hooks/{quote(args.name, safe='')}"
    if args.hooks_command == "show":
        return request(args.api, "GET", path), _show
    if args.hooks_command == "delete":
        return request(args.api, "DELETE", path), lambda h: f"deleted hook {h['name']}"
    body: dict[str, Any] = {"secrets": _secrets(args)}
    for field, value in (
        ("event", args.event),
        ("idempotency_header", args.key_header),
        ("idempotency_field", args.key_field),
    ):
        if value:
            body[field] = value
    return request(args.api, "PUT", path, body), _show


def _secrets(args: argparse.Namespace) -> list[str]:
    found = []
    for name in args.secret_env or []:
        value = os.environ.get(name)
        if not value:
            raise CliError(f"--secret-env {name}: the variable is not set (or empty)")
        found.append(value)
    for file in args.secret_file or []:
        try:
            found.append(Path(file).read_text().strip())
        except OSError as exc:
            raise CliError(f"--secret-file {file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CliError(f"--secret-file {file}: not UTF-8 text") from None
    if not 1 <= len(found) <= 2:
        raise CliError(
            "give a hook one secret, or two while rotating (--secret-env VAR, --secret-file F)"
        )
    return found


def _show(h: dict[str, Any]) -> str:
    key = h.get("idempotency_header") and f"header {h['idempotency_header']}"
    key = key or (h.get("idempotency_field") and f"payload field {h['idempotency_field']}")
    return "\n".join(
        [
            f"hook     {h['name']}  (POST {h['url_path']})",
            f"event    {h['event']}",
            f"secrets  {h['secrets']}",
            f"key      {key or 'the signature (a request resent is a duplicate)'}",
        ]
    )


def _list(out: dict[str, Any]) -> str:
    rows = [[h["name"], h["event"], h["secrets"], h["url_path"]] for h in out["hooks"]]
    return table(["NAME", "EVENT", "SECRETS", "PATH"], rows)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    hooks = sub.add_parser("hooks", help="signed webhooks whose requests become events")
    hsub = hooks.add_subparsers(dest="hooks_command", required=True)
    put = hsub.add_parser("put", parents=[common], help="create or replace a hook")
    put.add_argument("name")
    put.add_argument(
        "--secret-env", action="append", metavar="VAR", help="a secret from this variable"
    )
    put.add_argument("--secret-file", action="append", metavar="FILE", help="a secret's file")
    put.add_argument("--event", default=None, help="the event it makes (default hook.<name>)")
    key = put.add_mutually_exclusive_group()
    key.add_argument("--key-header", default=None, metavar="HEADER", help="idempotency key")
    key.add_argument("--key-field", default=None, metavar="FIELD", help="idempotency key")
    hsub.add_parser("list", parents=[common], help="the hooks (never a secret)")
    for name, text in (("show", "a hook (never a secret)"), ("delete", "delete a hook")):
        hsub.add_parser(name, parents=[common], help=text).add_argument("name")
