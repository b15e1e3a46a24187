"""``shardsched import crontab FILE`` (and ``k8s-cronjob FILE.yaml``, ``celery-beat
MODULE``): another scheduler's definitions as apply files.

What it cannot translate is said on stderr, one line each with where and why; what it
can is written as YAML ``shardsched apply -f`` takes, to stdout or into ``--dir`` (one
file per source). Nothing is sent to a deployment: ``apply --dry-run`` of the result
shows each job's first fires before anything is written. The translation itself is pure
(:mod:`shardsched.core.crontab_import`, :mod:`~shardsched.core.k8s_import`,
:mod:`~shardsched.core.celery_import`); reading the files, and the beat module, is here."""

from __future__ import annotations

import argparse
import os
import sys
import zoneinfo
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardsched.core.crontab_import import Imported

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


def _read(path: str, lenient: bool = False) -> str:
    """The file's text; ``lenient``: bytes that are not UTF-8 read as U+FFFD (cron reads
    bytes: a comment in Latin-1 must not stop an import; a line holding one is said)."""
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        return raw.decode("utf-8", errors="replace" if lenient else "strict")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None


def _yaml(documents: list[dict[str, Any]], header: str) -> str:
    yaml = yaml_module()
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    parts = [yaml.dump(d, Dumper=dumper, sort_keys=False, allow_unicode=True) for d in documents]
    return f"# {header}\n" + "---\n".join(parts)


def run_import(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    reader = {"crontab": _crontab, "k8s-cronjob": _k8s, "celery-beat": _celery}
    imported, source, header = reader[args.import_kind](args)
    for warning in imported.warnings:
        print(f"shardsched: {warning}", file=sys.stderr)
    text = _yaml(
        imported.documents, header + ": shardsched apply -f FILE --dry-run shows first fires"
    )
    if args.dir is None:
        return imported.documents, lambda _: text.rstrip("\n")
    out_dir = Path(args.dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--dir {args.dir}: {exc.strerror or exc}") from None
    target = out_dir / f"{source.replace('.', '-').replace(':', '-')}.yaml"
    target.write_text(text)
    return (
        [{"file": str(target), "jobs": len(imported.documents)}],
        lambda _: f"{len(imported.documents)} jobs written to {target}",
    )


def _crontab(args: argparse.Namespace) -> tuple[Imported, str, str]:
    from shardsched.core.crontab_import import read_crontab

    zone = args.tz_zone or machine_zone()
    try:
        zoneinfo.ZoneInfo(zone)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise CliError(f"{zone!r} is not a time zone (an IANA name: Europe/Berlin)") from None
    source = "crontab" if args.file == "-" else Path(args.file).name
    in_etc = args.file != "-" and (
        (Path(args.file).name == "crontab" and "/etc" in args.file) or "/cron.d/" in args.file
    )
    system = args.system or in_etc
    imported = read_crontab(_read(args.file, lenient=True), source, zone, system=system)
    kind = "system" if system else "user"
    return (
        imported,
        source,
        f"imported from {args.file} ({kind} crontab; zone {zone}, Debian cron's days and DST)",
    )


def _k8s(args: argparse.Namespace) -> tuple[Imported, str, str]:
    from shardsched.core.k8s_import import read_cronjobs

    yaml = yaml_module()
    try:
        documents = list(yaml.safe_load_all(_read(args.file)))
    except yaml.YAMLError as exc:
        raise CliError(f"{args.file} is not YAML: {' '.join(str(exc).split())}") from None
    source = "manifest" if args.file == "-" else Path(args.file).name
    return (
        read_cronjobs(documents, source),
        source,
        f"imported from {args.file} (Kubernetes CronJobs)",
    )


def _celery(args: argparse.Namespace) -> tuple[Imported, str, str]:
    from shardsched.core.celery_import import read_beat

    entries, app, zone = beat_of(args.module)
    return (
        read_beat(entries, args.app or app, zone),
        args.module,
        f"imported from {args.module} (Celery beat; zone {zone})",
    )


def beat_of(spec: str) -> tuple[list[Any], str, str]:
    """The beat schedule of ``module`` or ``module:attr`` (a Celery app, or a config module
    with ``beat_schedule``), what ``celery -A`` is given, and the schedule's zone."""
    import importlib

    from shardsched.core.celery_import import BeatEntry

    module_name, _, attr = spec.partition(":")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # the user's module: any error of its own
        raise CliError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.pop(0)
    if attr and not hasattr(module, attr):
        raise CliError(f"{spec}: {module_name} has no attribute {attr!r}")
    target: Any = getattr(module, attr) if attr else module
    conf = getattr(target, "conf", None)
    if conf is None and not attr:  # a module holding an app
        apps = [
            v
            for v in vars(module).values()
            if not isinstance(v, type) and hasattr(v, "conf") and hasattr(v, "tasks")
        ]
        conf = apps[0].conf if apps else None
    if conf is not None:
        schedule, zone = conf.beat_schedule or {}, conf.timezone or "UTC"
    else:
        schedule = getattr(target, "beat_schedule", None) or getattr(
            target, "CELERYBEAT_SCHEDULE", {}
        )
        zone = (
            getattr(target, "timezone", None) or getattr(target, "CELERY_TIMEZONE", None) or "UTC"
        )
    if not schedule:
        raise CliError(f"{spec}: no beat_schedule found (a Celery app's conf, or the module's)")
    entries = []
    for name, entry in schedule.items():
        when = entry.get("schedule")
        options = entry.get("options") or {}
        base: dict[str, Any] = {
            "name": str(name),
            "task": str(entry.get("task", "")),
            "args": list(entry.get("args") or ()),
            "kwargs": dict(entry.get("kwargs") or {}),
            "queue": options.get("queue"),
            "dropped": sorted(str(k) for k in options if k != "queue"),
        }
        if hasattr(when, "_orig_minute"):
            names = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
            fields = [str(getattr(when, f"_orig_{f}")) for f in names]
            parsed = [  # as Celery read them ('sunday' is 0), for what cron cannot read
                "*" if text.strip() in ("*", "?") else ",".join(map(str, sorted(getattr(when, f))))
                for f, text in zip(names, fields, strict=True)
            ]
            entries.append(BeatEntry(kind="crontab", fields=fields, parsed=parsed, **base))
        elif (
            isinstance(when, int | float)
            or hasattr(when, "total_seconds")
            or hasattr(when, "run_every")
        ):
            every = getattr(when, "run_every", when)
            seconds = every.total_seconds() if hasattr(every, "total_seconds") else float(every)
            entries.append(BeatEntry(kind="every", fields=[str(seconds)], **base))
        else:
            entries.append(BeatEntry(kind="other", fields=[type(when).__name__], **base))
    return entries, spec.partition(":")[0], str(zone)


def add_import_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "import",
        parents=[common],
        help="another scheduler's definitions as apply files (crontab, k8s, celery)",
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
        " once) on CRON_TZ's zone, else --zone, else this machine's; NAME=value lines become"
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
    k8s = kinds.add_parser(
        "k8s-cronjob",
        parents=[common],
        help="Kubernetes CronJob manifests",
        description="Each CronJob a job: schedule and timeZone, concurrencyPolicy as its"
        " overlap, startingDeadlineSeconds as its start deadline, suspend as paused,"
        " backoffLimit and activeDeadlineSeconds as attempts and timeout, the container's"
        " command and args as its command line. Its image is not pulled: say so, with the"
        " rest that cannot be translated, on stderr.",
    )
    k8s.add_argument("file", metavar="FILE", help="a manifest (YAML; - for stdin)")
    k8s.add_argument("--dir", metavar="DIR", help="write the apply file into DIR")
    beat = kinds.add_parser(
        "celery-beat",
        parents=[common],
        help="a Celery beat schedule (a module's app, or its beat_schedule)",
        description="Each beat_schedule entry a job whose command sends its task to the"
        " Celery workers as beat did (celery -A APP call TASK): crontab and timedelta"
        " schedules on the app's timezone; solar and custom schedules, and a crontab that"
        " restricts both day fields (Celery ANDs them, cron ORs), said as untranslatable."
        " The module is imported from the current directory.",
    )
    beat.add_argument("module", metavar="MODULE", help="module or module:attribute")
    beat.add_argument("--app", metavar="APP", help="what `celery -A` is given (default: MODULE)")
    beat.add_argument("--dir", metavar="DIR", help="write the apply file into DIR")
