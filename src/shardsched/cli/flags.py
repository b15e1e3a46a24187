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
        help="redis:// or rediss://[user@]host:port[/db], redis+cluster://host:port[,…], or"
        " redis+sentinel://host:port[,…]/service (or SHARDSCHED_REDIS_URL); give "
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
    p.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default WARNING",
    )
    p.add_argument(
        "--log-format",
        choices=["json", "text"],
        default="json",
        help="one JSON object per line (default), or text",
    )


def http_flags(p: argparse.ArgumentParser) -> None:
    """Who an HTTP API lets in (docs/security.md)."""
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
    p.add_argument(
        "--notify-allow-network",
        action="append",
        default=[],
        metavar="CIDR",
        help="a network webhooks may reach although it is loopback, link-local or "
        "reserved, e.g. 127.0.0.0/8 (repeatable; env SHARDSCHED_NOTIFY_ALLOW_NETWORKS)",
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
    try:
        parts = urlsplit(url)
        if parts.scheme in ("redis", "rediss"):  # one host: its port read for its ValueError
            parts.port  # noqa: B018
    except ValueError as exc:
        raise SystemExit(f"shardsched: --redis: {exc}") from None
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


#: Finished runs stay hot this long by default (a job's ``retention`` overrides it).
DEFAULT_RETENTION_S = 7 * 86400


def retention_flags(p: argparse.ArgumentParser, dev: bool = False) -> None:
    """``--archive`` and ``--retention-s`` of ``node`` and ``dev``."""
    where = "default <data-dir>/archive" if dev else "without it, history stays in Redis"
    p.add_argument(
        "--archive",
        default=None,
        metavar="URL",
        help=f"cold archive of finished runs: file:///path or s3://bucket/prefix ({where})",
    )
    p.add_argument(
        "--retention-s",
        type=int,
        default=DEFAULT_RETENTION_S,
        metavar="S",
        help="finished runs move to the archive this long after they end "
        f"(default {DEFAULT_RETENTION_S}, 7 days; 0 keeps them in Redis)",
    )
    p.add_argument(
        "--retention-every",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds between the owner's retention passes (default 30)",
    )


def archive_url(text: str) -> str:
    """A URL for ``--archive``: a plain path becomes an absolute ``file://`` URL."""
    if "://" in text:
        return text
    return "file://" + str(Path(text).expanduser().resolve())


def retention_of(args: argparse.Namespace, default_archive: Path | None = None) -> Any:
    """(archive URL or None, RetentionDefaults or None) from the flags; retention needs an
    archive (a run is archived before it leaves Redis) and a positive window."""
    from shardsched.store.retention import RetentionDefaults

    if args.retention_s < 0:
        sys.exit("shardsched: --retention-s must be 0 (keep) or a number of seconds")
    text = args.archive or (str(default_archive) if default_archive else None)
    url = archive_url(text) if text else None
    if url is None or args.retention_s == 0:
        return url, None
    if not 0.1 <= args.retention_every <= 86400:
        sys.exit("shardsched: --retention-every is seconds, from 0.1 to 86400")
    return url, RetentionDefaults(max_age_s=args.retention_s, every_s=args.retention_every)


#: Flags a leaf command takes that may also come before the command
#: (``shardsched --json jobs list`` as well as ``shardsched jobs list --json``).
GLOBAL_FLAGS = ("json", "api", "token_file", "output", "tz", "profile")


def global_flags(p: argparse.ArgumentParser) -> None:
    """The leaf commands' ``--json``, ``--api`` and ``--token-file``, accepted before the
    command too (``top_*`` until :func:`apply_global_flags` hands them to the leaf)."""
    p.add_argument("--json", dest="top_json", action="store_true", help="print JSON")
    p.add_argument("--api", dest="top_api", default=None, metavar="URL", help="the HTTP API")
    p.add_argument("--token-file", dest="top_token_file", default=None, metavar="PATH")
    p.add_argument(
        "-o",
        "--output",
        dest="top_output",
        default=None,
        metavar="FORMAT",
        choices=["table", "wide", "json", "yaml", "name"],
        help="table, wide, json, yaml, name",
    )
    p.add_argument("--tz", dest="top_tz", default=None, metavar="ZONE", help="times in ZONE")
    p.add_argument("--profile", dest="top_profile", default=None, metavar="NAME")


def apply_global_flags(args: argparse.Namespace) -> str | None:
    """Give the leaf command the flags given before it; an error message for one it does
    not take."""
    for name in GLOBAL_FLAGS:
        value = getattr(args, "top_" + name, None)
        if not value:
            continue
        if not hasattr(args, name):
            return f"--{name.replace('_', '-')} does not apply to {args.command}"
        if not getattr(args, name):
            setattr(args, name, value)
    return None


def api_flags(p: argparse.ArgumentParser) -> None:
    """--api and --token-file: where the HTTP API is and which token to send."""
    p.add_argument(
        "--api",
        default=None,
        metavar="URL",
        help="the HTTP API (default SHARDSCHED_API, the config file's api, or "
        "http://127.0.0.1:8080)",
    )
    p.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help="a file holding the API token (default SHARDSCHED_TOKEN, SHARDSCHED_TOKEN_FILE, "
        "the config file's token_file, or .shardsched/token)",
    )
    p.add_argument(
        "--profile",
        default=None,
        metavar="NAME",
        help="a profile of the config file (~/.config/shardsched/config.toml; or "
        "SHARDSCHED_PROFILE)",
    )


def output_flag(p: argparse.ArgumentParser) -> None:
    """-o: a table (wide: all of it), or the answer as JSON or YAML."""
    p.add_argument(
        "-o",
        "--output",
        choices=["table", "wide", "json", "yaml"],
        default=None,
        help="table (default), wide (everything), json or yaml",
    )


def job_limit_flags(p: argparse.ArgumentParser) -> None:
    """What a worker lets a job use: its user and limits (worker/sandbox.py), and the
    output Redis keeps (lua/lib/outquota.lua)."""
    p.add_argument("--run-as", default=None, metavar="USER", help="run jobs as USER")
    p.add_argument("--limit-memory", default=None, metavar="SIZE", help="per job, e.g. 1G")
    p.add_argument("--limit-cpu", type=int, default=None, metavar="S", help="CPU s per job")
    p.add_argument("--limit-nofile", type=int, default=None, metavar="N", help="open files")
    p.add_argument(
        "--limit-nproc",
        type=int,
        default=None,
        metavar="N",
        help="processes per job's uid (per run with --run-as-uids)",
    )
    p.add_argument(
        "--run-as-uids",
        default=None,
        metavar="FIRST-LAST",
        help="run each command as a uid of its own from this range (root only): jobs cannot "
        "read, signal or trace each other",
    )
    p.add_argument(
        "--output-quota",
        default="1G",
        metavar="SIZE",
        help="output Redis keeps over the whole deployment (default %(default)s; each "
        "shard its share); past it a run keeps only what fits, and says so",
    )
    p.add_argument(
        "--output-tail",
        default="64K",
        metavar="SIZE",
        help="the tail of each run's output kept (default %(default)s, at most 16M); what "
        "it printed before is counted, and the run marked truncated",
    )
    p.add_argument(
        "--job-output-quota",
        default="64M",
        metavar="SIZE",
        help="output Redis keeps over all runs of one job (default %(default)s)",
    )


def output_quota_sizes(args: argparse.Namespace) -> tuple[int, int, int]:
    """The worker's output sizes from its flags, in bytes: a run's tail kept, a job's
    output in Redis, all output in Redis; a ConfigError for a size it cannot read."""
    from shardsched.core.errors import ConfigError
    from shardsched.worker.sandbox import parse_size

    tail = parse_size(args.output_tail)
    if tail > 16 * 1024 * 1024:
        raise ConfigError("--output-tail is at most 16M: it is kept in Redis for every run")
    return tail, parse_size(args.job_output_quota), parse_size(args.output_quota)
