"""A crontab read as shardsched jobs: what ``shardsched import crontab`` writes as apply
documents, and every line it cannot translate, with why.

Both formats cron reads: a user's crontab (``crontab -l``: five time fields, then the
command) and the system's (``/etc/crontab``, ``/etc/cron.d/*``: a user name between the
fields and the command; the job runs as whoever the worker runs as, said once). Each job
is a cron schedule in the ``debian`` dialect, so its days and its DST behaviour are
Debian cron's (a fixed time in a skipped hour fires at the gap's end, a repeated hour
fires once; docs/concepts.md), on the zone cron would use: ``CRON_TZ`` above it, else the
zone given (the machine's, by default).

Kept: ``NAME=value`` lines become the env of the jobs below them (``SHELL``, ``PATH``,
``HOME`` included). Said as untranslatable: ``@reboot`` (no boot to fire on),
``MAILTO`` (mail is not sent: a notification rule on failures is the equivalent), a
command with an unescaped ``%`` (cron feeds what follows it to stdin), an environment
name a job may not set, a line that is not a crontab line.

Pure: text in, documents and warnings out; the CLI reads and writes the files.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from shardsched.core.env_names import env_name_refused
from shardsched.core.errors import ValidationError
from shardsched.core.field_errors import field_error
from shardsched.core.models import JobSpec
from shardsched.core.validation import check_job_id, validate_spec

_ENV = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$(?!\n)")
_SLUG = re.compile(r"[^a-z0-9]+")
#: What cron's own environment lines mean, not the command's.
CRON_SETTINGS = ("MAILTO", "MAILFROM", "CRON_TZ", "RANDOM_DELAY", "CONTENT_TYPE")


@dataclass
class Imported:
    """The jobs of one crontab as apply documents, and what could not be translated."""

    documents: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


#: A line that sets something, though not a variable cron would (``BAD-NAME=x``).
_ALMOST_ENV = re.compile(r"^(?![0-9*@])[^\s=]+\s*=")
#: Control characters: a name shows as one line (a tab in a command is a space in it).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _command(text: str) -> str | None:
    """The command as the shell gets it (``\\%`` is a literal %), or None when an
    unescaped % feeds the rest to stdin."""
    if re.search(r"(?<!\\)%", text):
        return None
    return text.replace("\\%", "%")


def job_id(source: str, expression: str, command: str) -> str:
    """A stable id: the source's and the command's words, and a digest of the line's
    meaning, so importing the file again names the same jobs."""
    words = _SLUG.sub("-", f"{source} {command.split()[0] if command.split() else ''}".lower())
    digest = hashlib.sha256(f"{expression}\0{command}".encode()).hexdigest()[:8]
    return f"{words.strip('-')[:60]}-{digest}".lstrip("-") or digest


def read_crontab(text: str, source: str, timezone: str, system: bool = False) -> Imported:
    """The jobs of crontab ``text`` (``source``: what to call it in ids and warnings)."""
    out = Imported()
    env: dict[str, str] = {}
    zone = timezone
    seen_users: set[str] = set()
    ids: dict[str, int] = {}
    fields = 6 if system else 5
    if text and not text.endswith("\n"):
        out.warnings.append(
            f"{source}: the last line ends without a newline: Debian's crontab refuses such"
            " a file and cron may skip that line; imported anyway"
        )
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"{source}:{number}"
        if not line or line.startswith("#"):
            continue
        if "\ufffd" in line:  # bytes that were not UTF-8 (the CLI read them replaced)
            out.warnings.append(f"{where}: not translated: it holds bytes that are not UTF-8")
            continue
        assignment = _ENV.match(line)
        if not assignment and _ALMOST_ENV.match(line):
            name = line.split("=", 1)[0].strip()
            out.warnings.append(
                f"{where}: {name!r} is not a variable name (letters, digits and _, not"
                " starting with a digit): not kept"
            )
            continue
        if assignment and not line.startswith("@") and not line[0].isdigit():
            name, value = assignment.group(1), _unquote(assignment.group(2))
            if name == "CRON_TZ":
                zone = value
            elif name in CRON_SETTINGS:
                out.warnings.append(
                    f"{where}: {name} is cron's own setting, not translated"
                    + (
                        " (no mail is sent: a notification rule on failed runs is the"
                        " equivalent, shardsched notify rules add)"
                        if name == "MAILTO"
                        else ""
                    )
                )
            elif (why := env_refused(name, value)) is not None:
                out.warnings.append(f"{where}: {name} is not kept: {why}")
            else:
                env[name] = value
            continue
        if line.startswith("@"):
            macro, _, rest = line.partition(" ")
            expression, rest = macro, rest.strip()
            if macro.lower() == "@reboot":
                out.warnings.append(
                    f"{where}: @reboot is not translated: a scheduler has no boot to fire"
                    " on (run it from the host's init system)"
                )
                continue
            parts = rest.split(None, 1) if system else [rest]
        else:
            split = line.split(None, fields)
            if len(split) <= fields:
                out.warnings.append(f"{where}: not a crontab line ({fields} fields and a command)")
                continue
            expression = " ".join(split[:5])
            parts = split[5:]
        if system:
            if len(parts) < 2:
                out.warnings.append(f"{where}: a system crontab line names a user, then a command")
                continue
            if parts[0] not in seen_users:  # each user once: another is another privilege
                out.warnings.append(
                    f"{where}: the user field ({parts[0]}) is not kept: a job runs as its"
                    " worker runs (shardsched worker --run-as)"
                )
                seen_users.add(parts[0])
            parts = parts[1:]
        command = _command(parts[0].strip()) if parts and parts[0].strip() else None
        if command is None:
            out.warnings.append(
                f"{where}: the command holds an unescaped % (cron sends what follows it to"
                " stdin): not translated; write \\% for a literal %"
            )
            continue
        for why in not_debian(expression):  # translated still: said, as cron refuses it
            out.warnings.append(f"{where}: {why}: Debian's cron refuses it; translated as"
                                " shardsched reads it")  # fmt: skip
        document = _document(source, expression, command, zone, env)
        repeats = ids.get(document["id"], 0)
        ids[document["id"]] = repeats + 1
        if repeats:  # the same line again: cron runs both, so two jobs
            document["id"] = f"{document['id'][:95]}-{repeats + 1}"
        problem = invalid(document)
        if problem is not None:
            out.warnings.append(f"{where}: not translated: {problem}")
            continue
        out.documents.append(document)
    return out


def _document(
    source: str, expression: str, command: str, zone: str, env: dict[str, str]
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "kind": "job",
        "id": job_id(source, expression, command),
        "name": _CONTROL.sub(" ", f"{source}: {command}")[:200],
        "schedule": {
            "type": "cron",
            "expression": expression,
            "timezone": zone,
            "dialect": "debian",
        },
        "command": command,
    }
    if env:
        document["env"] = dict(env)
    return document


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_RANGE = re.compile(r"([0-9]+|[a-z]{3})-([0-9]+|[a-z]{3})")


def not_debian(expression: str) -> list[str]:
    """What of a cron expression Debian's cron (Vixie cron 3.0) does not take: ``L``,
    ``W``, ``#``, ``?``, ``H`` and a range that wraps (``22-2``); [] for a plain one."""
    fields = expression.lower().split()
    if len(fields) != 5:  # a macro (@daily): cron's own
        return []
    out = []
    names = (None, None, None, _MONTHS, _DAYS)
    for n, (text, known) in enumerate(zip(fields, names, strict=True)):
        words = set(known or ())  # a name of the field goes; any other word is odd
        bare = "".join("" if w in words else "?" for w in re.findall(r"[a-z]{3}", text))
        bare += re.sub(r"[a-z]{3}", "", text)
        odd = sorted({c for c in bare if c in "lwh#?"})
        if odd:
            out.append(f"field {n + 1} ({text}) uses {' '.join(odd).upper()}")
            continue
        for lo, hi in _RANGE.findall(text):
            a = known.index(lo) if known and lo in known else int(lo) if lo.isdigit() else 0
            b = known.index(hi) if known and hi in known else int(hi) if hi.isdigit() else 0
            if a > b:
                out.append(f"field {n + 1} ({text}) has a range that wraps ({lo}-{hi})")
    return out


def env_refused(name: str, value: str) -> str | None:
    """Why a job may not set this variable (core/env_names: its name in words; its value
    as the API checks it), or None."""
    why = env_name_refused(name)
    if why is not None:
        return why
    probe = {"name": "x", "schedule": {"type": "interval", "every_s": 60}, "command": "true"}
    return invalid({**probe, "id": "probe", "env": {name: value}})


def invalid(document: dict[str, Any]) -> str | None:
    """Why the document is not a job the API would take, or None."""
    body = {k: v for k, v in document.items() if k not in ("kind", "id", "paused")}
    try:
        check_job_id(document["id"])
        validate_spec(msgspec.convert(body, JobSpec))
    except ValidationError as exc:
        return f"{exc.message} ({exc.field})"
    except msgspec.ValidationError as exc:
        err = field_error(exc)
        return f"{err.message} ({err.field})"
    return None
