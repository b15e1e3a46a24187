"""``shardsched notify channels|rules|deliveries``: notifications through the API (an
admin token).

A webhook's secret is read from an environment variable or a file, never from the
command line (where ``ps`` and the shell's history would keep it).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from shardsched.cli import style
from shardsched.cli.api import common_flags
from shardsched.cli.handles import dag_id_of, job_id_of
from shardsched.cli.http import CliError, endpoint, request
from shardsched.cli.render import answer, quoted, table

KINDS = (
    "failed", "dead_letter", "missed", "recovered", "quarantined", "auto_paused",
    "overrunning", "deadline_missed",
)  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    common = common_flags()
    notify = sub.add_parser(
        "notify",
        help="notifications: channels (webhook, apprise), rules, deliveries",
        description="Where failures and missed schedules are told: channels (a signed"
        " webhook, or any apprise URL: Slack, email, ...), rules (which events of which jobs"
        " go where), and the record of every delivery attempt.",
    )
    nsub = notify.add_subparsers(dest="notify_command", required=True)
    channels = nsub.add_parser("channels", help="list, set, rm, test")
    csub = channels.add_subparsers(dest="channels_command", required=True)
    csub.add_parser("list", parents=[common], help="the channels (no secret shown)")
    put = csub.add_parser("set", parents=[common], help="add or replace a channel")
    put.add_argument("name", help="1-63 of a-z 0-9 _ -")
    where = put.add_mutually_exclusive_group(required=True)
    where.add_argument("--webhook", metavar="URL", help="POST JSON to this http(s) URL")
    where.add_argument("--apprise", metavar="URL", help="an apprise URL (slack://, mailto://…)")
    secret = put.add_mutually_exclusive_group()
    secret.add_argument("--secret-env", metavar="VAR", help="sign with the secret in $VAR")
    secret.add_argument("--secret-file", type=Path, metavar="FILE", help="sign with this")
    put.add_argument("--header", action="append", default=[], metavar="NAME=VALUE")
    put.add_argument("--max-per-minute", type=int, default=20, metavar="N")
    put.add_argument("--max-attempts", type=int, default=8, metavar="N")
    put.add_argument("--retry-base", type=float, default=2.0, metavar="S", dest="retry_base_s")
    rm = csub.add_parser("rm", parents=[common], help="remove a channel no rule uses")
    rm.add_argument("name")
    test = csub.add_parser("test", parents=[common], help="send a test message")
    test.add_argument("name")
    rules = nsub.add_parser("rules", help="list, add, rm")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    rsub.add_parser("list", parents=[common], help="the rules")
    add = rsub.add_parser("add", parents=[common], help="a new rule")
    add.add_argument("--on", required=True, action="append", metavar="KINDS",
                     help=", ".join(KINDS) + " (comma-separated, or --on again)")  # fmt: skip
    add.add_argument("--channel", action="append", required=True, dest="channels")
    scope = add.add_mutually_exclusive_group()
    scope.add_argument("--job", metavar="JOB", help="only this job (its id or name)")
    scope.add_argument(
        "--dag", metavar="DAG", help="only this DAG, its runs and tasks (id or name)"
    )
    add.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    add.add_argument(
        "--group", type=float, default=10.0, metavar="S", dest="group_s",
        help="wait S seconds for more of the same before sending (default 10)",
    )  # fmt: skip
    add.add_argument("--description", default="")
    rrm = rsub.add_parser("rm", parents=[common], help="remove a rule")
    rrm.add_argument("rule_id")
    dl = nsub.add_parser("deliveries", parents=[common], help="messages and their attempts")
    dl.add_argument("msg_id", nargs="?", help="one message, with its body")
    dl.add_argument("--channel")
    dl.add_argument("--state", choices=["pending", "retrying", "delivered", "failed"])
    dl.add_argument("--limit", type=int, default=50)


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CliError(f"{flag} takes NAME=VALUE, not {item!r}")
        out[key] = value
    return out


def _secret(args: argparse.Namespace) -> str | None:
    if args.secret_env:
        value = os.environ.get(args.secret_env)
        if not value:
            raise CliError(f"${args.secret_env} is not set")
        return value
    if args.secret_file:
        try:
            return args.secret_file.read_text().strip()
        except OSError as exc:
            raise CliError(f"cannot read {args.secret_file}: {exc.strerror}") from None
    return None


def _call(args: argparse.Namespace) -> Any:
    api = endpoint(args.api, args.token_file, getattr(args, "profile", None))
    base = "/api/v1/notifications"
    cmd = args.notify_command
    if cmd == "channels":
        sub = args.channels_command
        if sub == "list":
            return request(api, "GET", f"{base}/channels")
        if sub == "rm":
            return request(api, "DELETE", f"{base}/channels/{quoted(args.name)}")
        if sub == "test":
            return request(api, "POST", f"{base}/channels/{quoted(args.name)}/test")
        body: dict[str, Any] = {
            "kind": "webhook" if args.webhook else "apprise",
            "url": args.webhook or args.apprise,
            "headers": _pairs(args.header, "--header"),
            "max_per_minute": args.max_per_minute,
            "max_attempts": args.max_attempts,
            "retry_base_s": args.retry_base_s,
        }
        if (secret := _secret(args)) is not None:
            body["secret"] = secret
        return request(api, "PUT", f"{base}/channels/{quoted(args.name)}", body)
    if cmd == "rules":
        sub = args.rules_command
        if sub == "list":
            return request(api, "GET", f"{base}/rules")
        if sub == "rm":
            return request(api, "DELETE", f"{base}/rules/{quoted(args.rule_id)}")
        body = {
            "events": [k.strip() for on in args.on for k in on.split(",") if k.strip()],
            "channels": args.channels,
            "labels": _pairs(args.label, "--label"),
            "group_s": args.group_s,
            "description": args.description,
        }
        if args.job:  # a name is a handle, as everywhere in the CLI
            body["job_id"] = job_id_of(api, args.job)
        if args.dag:
            dag = dag_id_of(api, args.dag)
            body["dag_id"] = dag if dag.startswith("dag_") else f"dag_{dag}"
        return request(api, "POST", f"{base}/rules", body)
    if args.msg_id:
        return request(api, "GET", f"{base}/deliveries/{quoted(args.msg_id)}")
    query = f"?limit={args.limit}"
    query += f"&channel={quoted(args.channel)}" if args.channel else ""
    query += f"&state={args.state}" if args.state else ""
    return request(api, "GET", f"{base}/deliveries{query}")


def _show(args: argparse.Namespace, out: Any) -> str:
    """The answer as a person reads it (each answer's shape says which it is)."""
    if "removed" in out:
        return f"removed {out['removed']}"
    if "events" in out:  # a rule
        return f"rule {out['id']}: {','.join(out['events'])} -> {','.join(out['channels'])}"
    if "kind" in out and "name" in out:  # a channel
        return f"channel {out['name']} ({out['kind']}) set"
    if set(out) == {"channels"}:
        rows = [
            [c["name"], c["kind"], c["url"], "yes" if c["signed"] else "-", c["max_per_minute"]]
            for c in out["channels"]
        ]
        return table(["NAME", "KIND", "URL", "SIGNED", "PER MIN"], rows)
    if "rules" in out:
        rows = [
            [r["id"], ",".join(r["events"]), ",".join(r["channels"]), _scope(r), r["group_s"]]
            for r in out["rules"]
        ]
        return table(["ID", "EVENTS", "CHANNELS", "SCOPE", "GROUP S"], rows)
    if "deliveries" in out:
        rows = [_delivery_row(d) for d in out["deliveries"]]
        return table(["ID", "CHANNEL", "STATE", "TRIES", "LAST ANSWER", "MADE", "TITLE"], rows)
    if "attempts" in out:  # one delivery
        lines = [" ".join(str(c) for c in _delivery_row(out))]
        lines += [
            f"  {style.when(a['at'])} {a['outcome']} {a['answer']} ({a['took_ms']} ms)"
            for a in out["attempts"]
        ]
        body = out.get("body") or {}
        return "\n".join([*lines, "", str(body.get("text", ""))])
    return f"test message {out['id']} made (see: shardsched notify deliveries {out['id']})"


def _scope(rule: dict[str, Any]) -> str:
    parts = [rule["job_id"] or "", rule["dag_id"] or ""]
    parts += [f"{k}={v}" for k, v in rule["labels"].items()]
    return " ".join(p for p in parts if p) or "all"


def _delivery_row(d: dict[str, Any]) -> list[Any]:
    last = d["attempts"][-1]["answer"] if d["attempts"] else "-"
    made = style.when(d["created_at"])
    return [d["id"], d["channel"], d["state"], len(d["attempts"]), last, made, d["title"][:60]]


def main(args: argparse.Namespace) -> int:
    return answer(args, lambda: _call(args), lambda out: _show(args, out))
