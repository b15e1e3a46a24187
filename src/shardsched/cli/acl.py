"""``shardsched acl``: the Redis ACL users of a deployment, one per role, as commands to
paste into ``redis-cli`` (the passwords are placeholders for the operator to set)."""

from __future__ import annotations

import argparse

from shardsched.store.acl import ROLES, acl_rules
from shardsched.store.keys import DEFAULT_NAMESPACE


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "acl",
        help="print the ACL SETUSER commands of the node, worker and reader roles",
        description="The Redis ACL users of a deployment, one per role, as commands to paste"
        " into redis-cli (the passwords are placeholders for you to set).",
    )
    p.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    p.add_argument("--role", choices=sorted(ROLES), action="append", default=None)


def main(args: argparse.Namespace) -> int:
    for role in args.role or list(ROLES):
        rules = " ".join(acl_rules(role, args.namespace))
        print(f"ACL SETUSER {args.namespace}-{role} reset on >CHANGE-ME {rules}")
    return 0
