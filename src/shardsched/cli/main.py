"""The ``shardsched`` command line. Its flags are a contract scripts rely on: add, never rename."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from shardsched.cli import commands as cmd
from shardsched.cli.flags import (
    api_flags,
    apply_global_flags,
    global_flags,
    http_flags,
    job_limit_flags,
    output_flag,
    redis_flags,
    retention_flags,
    tls_files,
)


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit status 2 (not the usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"shardsched: {message} (see {self.prog} --help)\n")


def build_parser(with_bench: bool = True) -> argparse.ArgumentParser:
    from shardsched._version import __version__

    parser = _Parser(
        prog="shardsched",
        description="A distributed cron and DAG scheduler on Redis: `shardsched dev` runs one"
        " on this machine; `shardsched COMMAND --help` says what each command does.",
    )
    parser.add_argument("--version", action="version", version=f"shardsched {__version__}")
    global_flags(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="everything in one process tree on an embedded redis-server")
    dev.add_argument("--http", default="127.0.0.1:8080", metavar="HOST:PORT")
    http_flags(dev)
    dev.add_argument("--data-dir", default=".shardsched")
    redis_flags(dev, required=False)
    dev.add_argument("--shards", type=int, default=None)
    dev.add_argument("--workers", type=int, default=1)
    dev.add_argument("--concurrency", type=int, default=16)
    dev.add_argument(
        "--queues", default="default", metavar="Q1,Q2", help="the queues its workers serve"
    )
    dev.add_argument(
        "--cluster",
        type=int,
        default=0,
        metavar="N",
        help="start a local Redis Cluster of N masters instead of one redis-server",
    )
    dev.add_argument(
        "--sentinel",
        action="store_true",
        help="start a primary, its replicas and three Redis Sentinels instead of one"
        " redis-server, and use them through a redis+sentinel:// URL (to try a failover:"
        " kill the primary)",
    )
    dev.add_argument(
        "--replicas",
        type=int,
        default=None,
        metavar="N",
        help="with --sentinel: the primary's replicas (default 1)",
    )
    retention_flags(dev, dev=True)
    dev.set_defaults(execute=cmd.dev)

    node = sub.add_parser("node", help="shard actors (and the HTTP API unless --no-http)")
    redis_flags(node)
    group = node.add_mutually_exclusive_group()
    group.add_argument("--http", default=None, metavar="HOST:PORT")
    group.add_argument("--no-http", action="store_true")
    http_flags(node)
    node.add_argument("--node-id", default=None)
    node.add_argument("--shards", type=int, default=None)
    node.add_argument("--lease-ttl", type=float, default=5.0, help="seconds (default 5)")
    node.add_argument("--renew-every", type=float, default=2.0, help="seconds (default 2)")
    node.add_argument("--allow-eviction", action="store_true")
    node.add_argument(
        "--durable-replicas",
        type=int,
        default=None,
        metavar="N",
        help="the deployment's durable mode: every write (a firing, a claim, a completion,"
        " an API change) is acknowledged only once N replicas have it (0 turns it off;"
        " kept in Redis for every process started after; default: as it is)",
    )
    node.add_argument(
        "--durable-timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help="with --durable-replicas: how long a call waits for them (default 1000)",
    )
    retention_flags(node)
    node.set_defaults(execute=cmd.node)

    worker = sub.add_parser("worker", help="claim and execute runs")
    redis_flags(worker)
    worker.add_argument("--concurrency", type=int, default=16)
    worker.add_argument(
        "--queues",
        default="default",
        metavar="Q1,Q2",
        help="claim only jobs of these queues, the first first (default: default)",
    )
    worker.add_argument("--worker-id", default=None)
    worker.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE for its @handler functions",
    )
    worker.add_argument(
        "--deploy",
        dest="deploys",
        action="append",
        default=[],
        metavar="MODULE:APP",
        help="serve the handlers of a shardsched.App and deploy it before claiming"
        " (opt-in reconcile, as `shardsched deploy`; a later deploy wins; repeatable)",
    )
    worker.add_argument(
        "--metrics",
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics",
    )
    worker.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass the worker's environment variable NAME on to jobs (repeatable); jobs "
        "otherwise see only PATH, HOME, LANG, LC_ALL, TZ and their SHARDSCHED_* run variables",
    )
    job_limit_flags(worker)
    worker.add_argument(
        "--handlers-only", action="store_true", help="run in-process handlers, no commands"
    )
    worker.add_argument(
        "--allow-command",
        action="append",
        default=[],
        metavar="REGEX",
        help="run only commands that fully match one of these (repeatable)",
    )
    worker.add_argument(
        "--drain-grace",
        type=float,
        default=10.0,
        help="on SIGTERM, seconds running jobs get to finish (default 10)",
    )
    worker.set_defaults(execute=cmd.worker)

    router = sub.add_parser("router", help="the stateless HTTP API")
    redis_flags(router)
    router.add_argument("--http", required=True, metavar="HOST:PORT")
    http_flags(router)
    router.set_defaults(execute=cmd.router)
    audit = sub.add_parser(
        "audit", help="account for every tick and every fired run; exit 1 on loss or strands"
    )
    redis_flags(audit, required=False)
    api_flags(audit)
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    output_flag(audit)
    audit.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="ignore ticks due in the last S seconds (in flight); default 2",
    )
    audit.add_argument(
        "--late-after",
        type=float,
        default=1.0,
        help="a firing later than S seconds counts as late; default 1",
    )
    audit.add_argument(
        "--stranded-after",
        type=float,
        default=300.0,
        help="a fired run not running anywhere for S seconds is stranded; default 300",
    )
    audit.add_argument(
        "--reference",
        action="store_true",
        help="expect cron ticks from the slow reference model, not the engine (slower)",
    )
    audit.set_defaults(execute=cmd.audit)
    from shardsched.cli import api as api_cli

    api_cli.add_parsers(sub)
    for name in (
        "jobs",
        "runs",
        "dead-letter",
        "dags",
        "events",
        "apply",
        "export",
        "import",
        "deploy",
        "hooks",
        "queues",
    ):
        sub.choices[name].set_defaults(execute=cmd.api)
    from shardsched.cli import tokens as tokens_cli

    tokens_cli.add_parser(sub)
    sub.choices["tokens"].set_defaults(execute=cmd.tokens)
    from shardsched.cli import notify as notify_cli

    notify_cli.add_parser(sub)
    sub.choices["notify"].set_defaults(execute=cmd.notify)
    from shardsched.cli import calendars as calendars_cli

    calendars_cli.add_parser(sub)
    sub.choices["calendars"].set_defaults(execute=cmd.calendars)
    from shardsched.cli import concurrency as concurrency_cli

    concurrency_cli.add_parser(sub)
    sub.choices["concurrency"].set_defaults(execute=cmd.concurrency)
    from shardsched.cli import acl as acl_cli

    acl_cli.add_parser(sub)
    sub.choices["acl"].set_defaults(execute=cmd.acl)
    completion = sub.add_parser(
        "completion",
        help="a completion script for bash, zsh or fish (see its --help)",
        description="Print a completion script. bash: shardsched completion bash >"
        " ~/.local/share/bash-completion/completions/shardsched; zsh: shardsched completion"
        ' zsh > "${fpath[1]}/_shardsched"; fish: shardsched completion fish >'
        " ~/.config/fish/completions/shardsched.fish",
    )
    completion.add_argument("shell", choices=["bash", "zsh", "fish"])
    completion.set_defaults(execute=_completion)
    status = sub.add_parser(
        "status",
        help="one screen: shards, nodes, workers, queues, alarms (--redis, or else the API)",
    )
    redis_flags(status, required=False)
    api_flags(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    output_flag(status)
    status.add_argument(
        "--all", action="store_true", help="every shard and worker, not only those off"
    )
    status.set_defaults(execute=cmd.status)
    bench = sub.add_parser("bench", help="benchmarks (each starts what it needs)")
    bench.set_defaults(execute=cmd.bench)
    if with_bench:  # their modules pull in redis-py and friends: only when asked for
        from shardsched.bench import (
            archive,
            auth,
            burst,
            commands,
            console,
            dag,
            deploy,
            events,
            faults,
            floor,
            footprint,
            instructions,
            nextfire,
            plan,
            register,
            scale,
            seedfleet,
            soak,
            steady,
            steady_floor,
            takeover,
            workers,
        )

        bench_sub = bench.add_subparsers(dest="bench_command", required=True)
        modules = (auth, burst, commands, faults, deploy, steady, soak, register, footprint)
        for module in (*modules, scale, plan, takeover, archive, floor, dag, workers, seedfleet):
            module.add_parser(bench_sub)
        for module in (instructions, console, steady_floor, nextfire, events):
            module.add_parser(bench_sub)
    return parser


def _completion(args: argparse.Namespace) -> None:
    from shardsched.cli.completion import script

    print(script(build_parser(with_bench=True), args.shell), end="")


def main(argv: list[str] | None = None) -> None:
    """The command line; output cut short by its reader (``| head``) ends it quietly."""
    try:
        _main(argv)
    except BrokenPipeError:
        # the reader went away: no traceback, and no second error flushing stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)  # 128 + SIGPIPE, as a shell reports a command killed by it


def _main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    # the bench modules pull in redis-py, pyarrow and friends: only for ``bench`` itself,
    # so ``shardsched --help`` and every other command start at once
    with_bench = bool(argv) and argv[0] == "bench"
    args = build_parser(with_bench).parse_args(argv)
    if (misplaced := apply_global_flags(args)) is not None:
        sys.exit(f"shardsched: {misplaced}")
    from shardsched.runtime import logs

    logs.configure(str(getattr(args, "log_level", "WARNING")), getattr(args, "log_format", "text"))
    if getattr(args, "concurrency", 1) < 1 or getattr(args, "workers", 0) < 0:
        sys.exit("shardsched: --concurrency must be >= 1 and --workers >= 0")
    if getattr(args, "shards", None) is not None and not 1 <= args.shards <= 16384:
        sys.exit("shardsched: --shards must be in 1..16384")
    if hasattr(args, "certfile"):
        tls_files(args)  # both or neither
    if getattr(args, "notify_allow_network", None):
        from shardsched.core.notify_addresses import ENV, parse_networks

        try:
            parse_networks(args.notify_allow_network)
        except ValueError as exc:
            sys.exit(f"shardsched: --notify-allow-network: {exc}")
        # the whole process reads it (the API's channel check, the node's sends), and so
        # do the children of `dev`
        os.environ[ENV] = ",".join(args.notify_allow_network)
    if getattr(args, "redis", None) is not None:
        from shardsched.cli.flags import redis_url_with_password
        from shardsched.store.redis import check_url

        from_argv = args.redis != os.environ.get("SHARDSCHED_REDIS_URL")
        password_file = getattr(args, "redis_password_file", None)  # bench has none
        args.redis = redis_url_with_password(args.redis, password_file, from_argv)

        try:
            check_url(args.redis)
        except ValueError as exc:
            sys.exit(f"shardsched: --redis: {exc}")
    sys.exit(args.execute(args))


if __name__ == "__main__":
    main()
