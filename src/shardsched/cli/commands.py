"""What each command runs (``set_defaults(execute=...)`` in cli/main.py): flags in, options
out, and the process or client it hands them to. Nothing here assembles a process
(service.py does); each import is made inside its command, so ``--help`` stays light."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from shardsched.cli.flags import output_quota_sizes, retention_of, tls_files
from shardsched.core.trace_keep import KeepRule


def _config(make: Any, *args: Any) -> Any:
    """``make(*args)``; a ConfigError is the command's usage error (exit status 2)."""
    from shardsched.core.errors import ConfigError

    try:
        return make(*args)
    except ConfigError as exc:
        print(f"shardsched: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _queues(text: str) -> tuple[str, ...]:
    """``--queues``; a bad name is the command's usage error (exit status 2)."""
    from shardsched.core.errors import ValidationError
    from shardsched.core.queues import parse_queues

    try:
        return parse_queues(text)
    except ValidationError as exc:
        print(f"shardsched: --queues: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from None


def http_options(args: argparse.Namespace, bind: str) -> Any:
    """The HttpOptions of the HTTP flags, for ``bind``."""
    from shardsched.service import HttpOptions

    return HttpOptions(
        bind,
        insecure_no_auth=args.insecure_no_auth,
        allow_hosts=tuple(args.allow_host),
        allow_origins=tuple(args.allow_origin),
        metrics_auth=args.metrics_auth,
        tls=tls_files(args),
    )


def node(args: argparse.Namespace) -> None:
    from shardsched import service

    archive, retention = retention_of(args)
    service.serve_node(
        service.NodeOptions(
            args.redis,
            args.namespace,
            shards=args.shards,
            http=None if args.no_http or args.http is None else http_options(args, args.http),
            node_id=args.node_id,
            lease_ttl_s=args.lease_ttl,
            renew_every_s=args.renew_every,
            allow_eviction=args.allow_eviction,
            retention=retention,
            archive=archive,
            durable=_durability(args),
        )
    )


def _durability(args: argparse.Namespace) -> Any:
    from shardsched.store.deployment import Durability

    if args.durable_replicas is None:
        if args.durable_timeout_ms is not None:
            raise SystemExit("shardsched: node --durable-timeout-ms goes with --durable-replicas")
        return None
    timeout_ms = 1000 if args.durable_timeout_ms is None else args.durable_timeout_ms
    if not 0 <= args.durable_replicas <= 16 or not 10 <= timeout_ms <= 60_000:
        raise SystemExit(
            "shardsched: node --durable-replicas is 0 to 16, --durable-timeout-ms 10 to 60000"
        )
    return Durability(args.durable_replicas, timeout_ms)


def router(args: argparse.Namespace) -> None:
    from shardsched import service

    service.serve_router(args.redis, args.namespace, http_options(args, args.http))


def worker(args: argparse.Namespace) -> None:
    from shardsched import service
    from shardsched.worker.sandbox import CommandPolicy, Sandbox

    sandbox = _config(Sandbox.make, args.run_as, args.limit_memory, args.limit_cpu,
                      args.limit_nofile, args.limit_nproc, args.run_as_uids,
                      args.concurrency)  # fmt: skip
    queues = _queues(args.queues)
    service.serve_worker(
        service.WorkerOptions(
            args.redis,
            args.namespace,
            worker_id=args.worker_id,
            concurrency=args.concurrency,
            drain_grace_s=args.drain_grace,
            pass_env=tuple(args.pass_env),
            imports=tuple(args.imports),
            deploys=tuple(args.deploys),
            sandbox=sandbox,
            policy=_config(CommandPolicy.of, args.handlers_only, args.allow_command),
            output_sizes=_config(output_quota_sizes, args),
            metrics=args.metrics,
            queues=queues,
        )
    )


def dev(args: argparse.Namespace) -> None:
    from shardsched import dev as dev_command

    args.queues = ",".join(_queues(args.queues))  # a bad name stops dev, not each worker
    if args.sentinel and (args.cluster or args.redis):
        raise SystemExit(
            "shardsched: dev --sentinel starts its own Redis: not with --cluster or --redis"
        )
    if args.replicas is not None and not args.sentinel:
        raise SystemExit("shardsched: dev --replicas goes with --sentinel")
    if args.replicas is not None and not 1 <= args.replicas <= 5:
        raise SystemExit("shardsched: dev --replicas is 1 to 5")
    try:  # its node and worker would each stop on it, and the worker be restarted forever
        KeepRule.from_env(os.environ)
    except ValueError as exc:
        raise SystemExit(f"shardsched: {exc}") from None
    dev_command.main(args, *retention_of(args, Path(args.data_dir) / "archive"))


def status(args: argparse.Namespace) -> int:
    from shardsched.cli.status import run_status

    return run_status(args)


def audit(args: argparse.Namespace) -> int:
    from shardsched.cli.audit import run_audit

    return run_audit(args)


def api(args: argparse.Namespace) -> int:
    from shardsched.cli import api as api_cli

    return api_cli.main(args)


def tokens(args: argparse.Namespace) -> int:
    from shardsched.cli import tokens as tokens_cli

    return tokens_cli.main(args)


def notify(args: argparse.Namespace) -> int:
    from shardsched.cli import notify as notify_cli

    return notify_cli.main(args)


def calendars(args: argparse.Namespace) -> int:
    from shardsched.cli import calendars as calendars_cli

    return calendars_cli.main(args)


def concurrency(args: argparse.Namespace) -> int:
    from shardsched.cli import concurrency as concurrency_cli

    return concurrency_cli.main(args)


def acl(args: argparse.Namespace) -> int:
    from shardsched.cli import acl as acl_cli

    return acl_cli.main(args)


def bench(args: argparse.Namespace) -> None:
    args.bench(args)
