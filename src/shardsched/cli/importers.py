"""``shardsched import crontab FILE``: another scheduler's definitions as apply files.

What it cannot translate is said on stderr, one line each with where and why; what it
can is written as YAML ``shardsched apply -f`` takes, to stdout or into ``--dir`` (one
file per source). Nothing is sent to a deployment: ``apply --dry-run`` of the result
shows each job's first fires before anything is written. The translation itself is pure
(:mod:`shardsched.core.crontab_import`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shardsched.cli.definitions import yaml_module
from shardsched.cli.http import CliError


def machine_zone() -> str:
    """The zone cron on this machine would use: ``TZ``, ``/etc/timezone``, the
    ``/etc/localtime`` link, else UTC."""
    if zone := os.environ.get("TZ", "").lstrip(":").strip():
        return zone
    try:
        return Path("/etc/timezone").read_text().strip() or "UTC"
    except OSError:
        pass
    link = Path("/etc/localtime")
    if link.is_symlink():
        target = str(link.resolve())
        if "/zoneinfo/" in target:
            return target.split("/zoneinfo/", 1)[1]
    return "UTC"


def _read(path: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None


def _yaml(documents: list[dict[str, Any]], header: str) -> str:
    yaml = yaml_module()
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    parts = [yaml.dump(d, Dumper=dumper, sort_keys=False, allow_unicode=True) for d in documents]
    return f"# {header}\n" + "---\n".join(parts)


def run_import(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    from shardsched.core.crontab_import import read_crontab

    zone = args.tz_zone or machine_zone()
    source = "crontab" if args.file == "-" else Path(args.file).name
    system = (
        args.system
        or (args.file != "-" and (Path(args.file).name == "crontab" and "/etc" in args.file))
        or "/cron.d/" in args.file
    )
    imported = read_crontab(_read(args.file), source, zone, system=system)
    for warning in imported.warnings:
        print(f"shardsched: {warning}", file=sys.stderr)
    header = (
        f"imported from {args.file} ({'system' if system else 'user'} crontab; zone {zone},"
        " Debian cron's days and DST): shardsched apply -f FILE --dry-run shows first fires"
    )
    text = _yaml(imported.documents, header)
    if args.dir is None:
        return imported.documents, lambda _: text.rstrip("\n")
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.replace('.', '-')}.yaml"
    target.write_text(text)
    return (
        [{"file": str(target), "jobs": len(imported.documents)}],
        lambda _: f"{len(imported.documents)} jobs written to {target}",
    )


def add_import_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "import",
        parents=[common],
        help="another scheduler's definitions as apply files (crontab)",
        description="Translate another scheduler's definitions into YAML that `shardsched"
        " apply -f` takes, to stdout or into --dir; every line that cannot be translated is"
        " said on stderr with why. Nothing is sent to the deployment.",
    )
    kinds = p.add_subparsers(dest="import_kind", required=True, metavar="FORMAT")
    cron = kinds.add_parser(
        "crontab",
        parents=[common],
        help="a user's crontab (crontab -l) or a system one (/etc/crontab, /etc/cron.d/*)",
        description="Each line a job: a cron schedule in the debian dialect (Debian cron's"
        " days and DST: a time in a skipped hour fires at the gap's end, a repeated hour"
        " once) on CRON_TZ's zone, else --tz, else this machine's; NAME=value lines become"
        " the env of the jobs below them. @reboot, MAILTO and commands with an unescaped %"
        " are said as untranslatable.",
    )
    cron.add_argument("file", metavar="FILE", help="the crontab (- for stdin)")
    cron.add_argument("--system", action="store_true",
                      help="the system format (a user field before the command); default"
                      " for /etc/crontab and /etc/cron.d/*")  # fmt: skip
    cron.add_argument("--zone", dest="tz_zone", metavar="ZONE",
                      help="the schedules' zone (default: TZ, /etc/timezone, UTC)")  # fmt: skip
    cron.add_argument("--dir", metavar="DIR", help="write the apply file into DIR")
