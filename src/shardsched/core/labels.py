"""What a job's labels mean to shardsched itself: the ``?label=`` filter of a list, and the
``critical`` label the missed-schedule page keys on (the seed's "tagged critical")."""

from __future__ import annotations

import msgspec

from shardsched.core.errors import ValidationError

#: The label that makes a job's missed tick page (deploy/prometheus/shardsched-alerts.yml).
CRITICAL = "critical"
#: The label whose value the per-schedule accounting metric counts ticks by
#: (``shardsched_schedule_ticks_total{team, outcome, reason}``): a bounded set of teams,
#: never one series per job.
ACCOUNT_LABEL = "team"
#: The values of ``critical`` that mean yes (anything else means no).
_YES = frozenset({"true", "yes", "1"})


def is_critical(labels: dict[str, str]) -> bool:
    """Whether ``labels`` mark a job critical: ``critical: "true"`` (or yes, 1)."""
    return labels.get(CRITICAL, "").strip().lower() in _YES


def parse_label_filter(text: str, field: str = "$.label") -> dict[str, str]:
    """``team:payments,tier:gold`` as {key: value}: a list keeps what has every pair. A
    key holds no ':' (LabelKey), so each pair splits at its first one."""
    wanted: dict[str, str] = {}
    for pair in text.split(","):
        key, colon, value = pair.strip().partition(":")
        if not colon or not key:
            raise ValidationError(f"{pair!r} is not key:value (e.g. team:payments)", field)
        if key in wanted and wanted[key] != value:
            raise ValidationError(f"label {key!r} is asked for twice", field)
        wanted[key] = value
    return wanted


def matches(labels: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in wanted.items())


class LabelsOnly(msgspec.Struct):
    """The labels of a stored job or DAG spec, decoded without the rest of it."""

    labels: dict[str, str] = msgspec.field(default_factory=dict)
