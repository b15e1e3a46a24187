"""A cron schedule's DST policy, as users write it (``dst`` of a cron schedule): what it
does with a wall time its zone's clock skips or shows twice. What the policy means, and
the wall times it does not fire at, is core/dst.py's."""

from __future__ import annotations

import enum

import msgspec


class DstGap(enum.StrEnum):
    """A matching wall time the clock skips (spring forward)."""

    SHIFT = "shift"  #: fire once, moved forward by the size of the gap
    END = "end"  #: fire once, at the gap's end (Debian cron's: all its matches as one)
    SKIP = "skip"  #: no firing: recorded skipped (``dst_gap``)


class DstRepeat(enum.StrEnum):
    """A matching wall time the clock shows twice (fall back)."""

    FIRST = "first"  #: fire at its first occurrence only
    SECOND = "second"  #: fire at its second occurrence only
    BOTH = "both"  #: fire at both


class DstPolicy(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What a cron schedule does at a DST change. A field left out keeps the dialect's
    rule for it (core/schedule.py): a fixed job shifts past a gap (debian: fires at its
    end) and fires at the first of a repeated time; a wildcard job (hour field starting
    with ``*``; debian: minute or hour) has no firing in a gap and fires at both
    occurrences of a repeated time."""

    gap: DstGap | None = None
    repeat: DstRepeat | None = None
