"""How the CLI shows things to people: times on a wall clock (the machine's zone, or
``--tz``) and relative to now ("4m ago", "in 2h"), durations ("1.2s", "20m"), a cron
expression in words, states in colour on a terminal (never with ``NO_COLOR``, never into
a pipe), narrow tables by default and every column with ``-o wide``.

One :class:`Style` per process, set by :func:`configure` from the command's flags; the
renderers read :data:`current`. JSON and YAML output never pass through here: scripts get
the API's own values.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from shardsched.core import schedule_words
from shardsched.core.durations import duration_text

_COLOURS = {
    "succeeded": "32",
    "active": "32",
    "running": "33",
    "claimed": "33",
    "retrying": "33",
    "queued": "33",
    "paused": "33",
    "failed": "31",
    "dead_letter": "31",
    "deleted": "2",
    "skipped": "2",
    "cancelled": "2",
}


@dataclass
class Style:
    zone: tzinfo | None = None  #: None: the machine's local zone
    wide: bool = False
    colour: bool = False
    now: datetime = field(default_factory=lambda: datetime.now(UTC))


current = Style()


def configure(output: str = "table", tz: str | None = None, colour: str = "auto") -> Style:
    """The style of this run; ValueError for a zone that does not exist."""
    global current
    zone: tzinfo | None = None
    if tz:
        try:
            zone = UTC if tz.upper() == "UTC" else ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"--tz: no time zone {tz!r} (an IANA name: Europe/Berlin)") from None
    wants = colour == "always" or (
        colour == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    )
    current = Style(zone=zone, wide=output == "wide", colour=wants and output in ("table", "wide"))
    return current


def tick() -> None:
    """Now is now again (a ``--watch`` redraw): relative times are from this instant."""
    current.now = datetime.now(UTC)


def painted(state: str | None) -> str | None:
    """A state, coloured on a terminal."""
    if state is None or not current.colour or state.split()[0] not in _COLOURS:
        return state
    return f"\x1b[{_COLOURS[state.split()[0]]}m{state}\x1b[0m"


def parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def relative(when: datetime) -> str:
    """'4m ago', 'in 2h', 'now'."""
    seconds = (when - current.now).total_seconds()
    if abs(seconds) < 1:
        return "now"
    text = duration_text(round(abs(seconds)) if abs(seconds) >= 60 else round(abs(seconds), 1))
    text = _coarse(text)
    return f"in {text}" if seconds > 0 else f"{text} ago"


def _coarse(text: str) -> str:
    """The two largest units: '2d3h', not '2d3h4m5s'."""
    parts, unit = [], ""
    for ch in text:
        unit += ch
        if ch.isalpha():
            parts.append(unit)
            unit = ""
    return "".join(parts[:2]) if parts else text


def local(when: datetime) -> datetime:
    return when.astimezone(current.zone) if current.zone else when.astimezone()


def when(text: str | None) -> str | None:
    """A time for a table: relative, with the wall clock when it is not close by (wide:
    the full local time and the relative one)."""
    at = parse(text)
    if at is None:
        return text
    there = local(at)
    if current.wide:
        return f"{there.strftime('%Y-%m-%d %H:%M:%S')} {there.tzname()} ({relative(at)})"
    distance = abs((at - current.now).total_seconds())
    if distance < 6 * 3600:
        return relative(at)
    same_day = there.date() == local(current.now).date()
    return there.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M")


def clock(text: str | None) -> str | None:
    """A time to the millisecond on the wall clock, for a log of events (wide: the date)."""
    at = parse(text)
    if at is None:
        return text
    there = local(at)
    shown = there.strftime("%Y-%m-%d %H:%M:%S" if current.wide else "%H:%M:%S")
    return f"{shown}.{there.microsecond // 1000:03d}"


def instant(text: str | None) -> str | None:
    """A time for a detail view: the wall clock, its zone, and how far from now."""
    at = parse(text)
    if at is None:
        return text
    there = local(at)
    return f"{there.strftime('%Y-%m-%d %H:%M:%S')} {there.tzname()} ({relative(at)})"


def took(start: str | None, end: str | None) -> str | None:
    """How long a run took (or has been running)."""
    a, b = parse(start), parse(end)
    if a is None:
        return None
    seconds = ((b or current.now) - a).total_seconds()
    text = f"{seconds:.1f}s" if seconds < 60 else _coarse(duration_text(round(seconds)))
    return text if b else f"{text}…"


def cron_words(expression: str) -> str | None:
    """A cron expression in words ('At 03:00, Monday through Friday'); None if the
    describer cannot say (core/schedule_words.py: the console's wording too)."""
    return schedule_words.cron_words(expression)
