"""``shardsched tokens create|list|revoke|log``: API tokens, through the API (with an admin
token) or, to make the first one, straight in Redis with ``--redis``.

A new token's secret is printed once, on stdout, and is never shown again: Redis keeps
only its hash.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from shardsched.cli import style
from shardsched.cli.api import common_flags
from shardsched.cli.flags import redis_flags
from shardsched.cli.http import CliError, endpoint, request
from shardsched.cli.render import answer, quoted, table
from shardsched.core.access import Scope


def add_parser(sub: argparse._SubParsersAction) -> None:
    common = common_flags()
    direct = argparse.ArgumentParser(add_help=False)
    redis_flags(direct, required=False)
    tokens = sub.add_parser(
        "tokens",
        help="API tokens: create (shown once), list, revoke",
        description="API tokens, through the API (with an admin token) or, to make the first"
        " one, straight in Redis with --redis. A new token's secret is printed once, on"
        " stdout; Redis keeps only its hash.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tsub = tokens.add_subparsers(dest="tokens_command", required=True)
    create = tsub.add_parser("create", parents=[common, direct], help="a new token")
    create.add_argument("name", help="unique: letters, digits, . _ - @")
    create.add_argument(
        "--scope",
        dest="scopes",
        action="append",
        required=True,
        choices=[s.value for s in Scope],
        help="read, write (covers read), admin (covers write), worker (/internal only); repeatable",
    )
    create.add_argument(
        "--prefix",
        dest="prefixes",
        action="append",
        default=[],
        metavar="NAME_PREFIX",
        help="bind the token to a team: it sees and changes only jobs and DAGs whose name "
        "starts with one of these (repeatable)",
    )
    tsub.add_parser("list", parents=[common, direct], help="names, scopes, teams")
    revoke = tsub.add_parser("revoke", parents=[common, direct], help="refused from now on")
    revoke.add_argument("name", help="its name, or the SHA-256 of its secret (64 hex digits)")
    tsub.add_parser("log", parents=[common, direct], help="who made or revoked which token")


def _through_api(args: argparse.Namespace) -> Any:
    api = endpoint(args.api, args.token_file, getattr(args, "profile", None))
    cmd = args.tokens_command
    if cmd == "create":
        body = {"name": args.name, "scopes": args.scopes, "prefixes": args.prefixes}
        return request(api, "POST", "/api/v1/tokens", body)
    if cmd == "list":
        return request(api, "GET", "/api/v1/tokens")
    if cmd == "log":
        return request(api, "GET", "/api/v1/tokens/log")
    return request(api, "DELETE", f"/api/v1/tokens/{quoted(args.name)}")


def _in_redis(args: argparse.Namespace) -> Any:
    import msgspec
    import trio

    from shardsched import service
    from shardsched.core.access import TokenRequest
    from shardsched.core.errors import ShardschedError
    from shardsched.ops.access import tokens
    from shardsched.store.drive import drive_async
    from shardsched.store.redis import RedisError

    async def run() -> Any:
        redis, dep = await service.open_redis(args.redis, args.namespace, None, 1, wait=False)
        try:
            cmd = args.tokens_command
            if cmd == "create":
                body = TokenRequest(name=args.name, scopes=args.scopes, prefixes=args.prefixes)
                op = tokens.create_token(dep, body, "shardsched tokens (redis)")
            elif cmd == "list":
                op = tokens.list_tokens(dep)
            elif cmd == "log":
                op = tokens.token_log(dep)
            else:
                op = tokens.revoke_token(dep, args.name, "shardsched tokens (redis)")
            return await drive_async(op, redis)
        finally:
            await redis.aclose()

    try:
        return msgspec.to_builtins(trio.run(run))
    except (ShardschedError, RedisError, msgspec.ValidationError) as exc:
        raise CliError(str(exc)) from None


def _show(args: argparse.Namespace, out: Any) -> str:
    cmd = args.tokens_command
    if cmd == "create":
        team = f", team {', '.join(out['prefixes'])}" if out["prefixes"] else ""
        print(
            f"token {out['name']!r} ({', '.join(out['scopes'])}{team}); shown once:",
            file=sys.stderr,
        )
        return str(out["token"])
    if cmd == "revoke":
        return f"revoked {out['revoked']}"
    if cmd == "log":
        acts = [
            [style.when(a["at"]), a["action"], a["name"], a["by"], a["detail"] or "-"]
            for a in out["acts"]
        ]
        return table(["AT", "ACTION", "TOKEN", "BY", "DETAIL"], acts)
    rows = [
        [
            t["name"],
            ",".join(t["scopes"]),
            ",".join(t["prefixes"]) or "-",
            style.when(t["created_at"]),
            t["created_by"],
        ]
        for t in out["tokens"]
    ]
    return table(["NAME", "SCOPES", "TEAM", "CREATED", "BY"], rows)


def main(args: argparse.Namespace) -> int:
    call = _in_redis if args.redis else _through_api
    return answer(args, lambda: call(args), lambda out: _show(args, out))
