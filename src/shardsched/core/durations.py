"""Durations as people write them: ``45s``, ``20m``, ``1h30m``, ``1d``, ``2d12h``, ``0.5s``
(and a bare number of seconds), both ways."""

from __future__ import annotations

import re

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming what was wrong."""
    raw = text.strip().lower()
    try:
        seconds = float(raw)
    except ValueError:
        pos, seconds = 0, 0.0
        seen: list[str] = []
        for m in _PART.finditer(raw):
            if m.start() != pos or m.group(2) in seen:
                break
            seen.append(m.group(2))
            seconds += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if not raw or pos != len(raw):
            raise ValueError(
                f"{text!r} is not a duration (write it like 90s, 20m, 1h30m, 1d)"
            ) from None
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"{text!r} is not a duration (a positive length of time)")
    return seconds


def duration_text(seconds: float) -> str:
    """A duration as people write it: 45s, 20m, 1h30m, 1d, 2d12h, 0.5s."""
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:g}s"
    rest, parts = int(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"
