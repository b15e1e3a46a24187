"""A Celery beat schedule read as shardsched jobs: what ``shardsched import celery-beat``
writes as apply documents, and every entry it cannot translate, with why.

An entry's schedule, as the CLI reads it off the beat module (:class:`BeatEntry`): a
``crontab`` (its five fields as written), a ``timedelta`` or a number of seconds (an
interval), or something else (``solar``: sunrise and sunset have no cron form; a custom
schedule class). The job's command sends the task to the Celery workers as beat did
(``celery -A APP call TASK --args … --kwargs … --queue …``), so moving the clock to
shardsched changes nothing else; its ticks, lateness and misses are shardsched's.

Celery's crontab matches a day when the day of month **and** the day of week match; cron
(and shardsched) when either does. An entry restricting both is said as untranslatable.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from shardsched.core.crontab_import import Imported, invalid

_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class BeatEntry:
    """One entry of ``beat_schedule``, as plain data."""

    name: str
    task: str
    kind: str  #: crontab | every | other
    #: crontab: minute, hour, day_of_month, month_of_year, day_of_week as written;
    #: every: [seconds]; other: [the schedule's type name]
    fields: list[str] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None
    #: its ``options`` other than ``queue`` (expires, priority…): not kept, said
    dropped: list[str] = field(default_factory=list)
    #: crontab: the five fields as Celery parsed them (``sunday`` is ``0``), used where
    #: the fields as written are not cron's
    parsed: list[str] = field(default_factory=list)


def _unrestricted(text: str) -> bool:
    return text.strip() in ("*", "?")


def read_beat(entries: list[BeatEntry], app: str, timezone: str) -> Imported:
    """The jobs of a beat schedule; ``app``: what ``celery -A`` is given."""
    out = Imported()
    for entry in entries:
        where = f"beat_schedule[{entry.name!r}]"
        if not entry.task:
            out.warnings.append(f"{where}: not translated: it names no task")
            continue
        if entry.kind == "other":
            kind = entry.fields[0] if entry.fields else "?"
            why = (
                "solar schedules (sunrise, sunset…) have no cron form"
                if kind == "solar"
                else f"a {kind} schedule is not a crontab or an interval"
            )
            out.warnings.append(f"{where}: not translated: {why}")
            continue
        if entry.kind == "crontab":
            minute, hour, dom, month, dow = entry.fields
            if not _unrestricted(dom) and not _unrestricted(dow):
                out.warnings.append(
                    f"{where}: not translated: Celery matches a day when day_of_month AND"
                    f" day_of_week match ({dom!r}, {dow!r}); cron when either does"
                )
                continue
            schedule: dict[str, Any] = {
                "type": "cron",
                "expression": " ".join([minute, hour, dom, month, dow]),
                "timezone": timezone,
            }
        else:
            schedule = {"type": "interval", "every_s": float(entry.fields[0])}
        try:
            command = _command(app, entry)
        except (TypeError, ValueError) as exc:  # args Celery pickles, JSON cannot say
            out.warnings.append(f"{where}: not translated: its args are not JSON ({exc})")
            continue
        if entry.dropped:
            out.warnings.append(
                f"{where}: options {', '.join(entry.dropped)} not kept (only queue is)"
            )
        document: dict[str, Any] = {
            "kind": "job",
            "id": _id(entry.name),
            "name": entry.name[:200],
            "schedule": schedule,
            "command": command,
            "labels": {"celery-task": entry.task[:63]},
        }
        problem = invalid(document)
        if problem is not None and entry.kind == "crontab" and entry.parsed:
            document["schedule"] = {**schedule, "expression": " ".join(entry.parsed)}
            problem = invalid(document)
        if problem is not None:
            out.warnings.append(f"{where}: not translated: {problem}")
            continue
        out.documents.append(document)
    return out


def _id(name: str) -> str:
    slug = _SLUG.sub("-", name.lower()).strip("-")[:90] or "entry"
    return f"beat-{slug}"


def _command(app: str, entry: BeatEntry) -> str:
    argv = ["celery", "-A", app, "call", entry.task]
    if entry.args:
        argv += ["--args", json.dumps(list(entry.args))]
    if entry.kwargs:
        argv += ["--kwargs", json.dumps(entry.kwargs, sort_keys=True)]
    if entry.queue:
        argv += ["--queue", entry.queue]
    return shlex.join(argv)
