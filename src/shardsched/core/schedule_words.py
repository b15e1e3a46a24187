"""A schedule as people say it: ``every 1d``, ``At 04:00`` (cron in words, by the
cron-descriptor library), ``once at …``. One wording for the CLI and the console (which
reads it from a job's upcoming fires), so the two never disagree."""

from __future__ import annotations

from functools import cache

from shardsched.core.durations import duration_text
from shardsched.core.schedule_kinds import (
    CronSchedule,
    IntervalSchedule,
    MultiSchedule,
    OnceSchedule,
    Schedule,
    TriggeredSchedule,
    WindowSchedule,
)


@cache  # a fleet shares few expressions; a list of jobs words each once
def cron_words(expression: str) -> str | None:
    """A cron expression in words ('At 03:00, Monday through Friday'); None if the
    describer cannot say."""
    try:
        from cron_descriptor import ExpressionDescriptor, Options
    except ImportError:
        return None
    options = Options()
    options.use_24hour_time_format = True
    try:
        return str(ExpressionDescriptor(expression, options).get_description())
    except Exception:
        return None


def schedule_words(schedule: Schedule) -> str:
    """The schedule in words: a cron's description and zone, an interval's duration."""
    match schedule:
        case CronSchedule(expression=expr, timezone=zone):
            words = cron_words(expr) or f"cron {expr}"
            return words if zone == "UTC" else f"{words} ({zone})"
        case IntervalSchedule(every_s=every):
            return f"every {duration_text(every)}"
        case WindowSchedule(cron=expr, timezone=zone, duration_s=length):
            words = cron_words(expr) or f"cron {expr}"
            where = "" if zone == "UTC" else f" ({zone})"
            return f"once in each window: {words}{where}, for {duration_text(length)}"
        case MultiSchedule(schedules=specs):
            return "any of: " + "; ".join(schedule_words(spec) for spec in specs)
        case OnceSchedule(at=at):
            return f"once at {at.isoformat()}"
        case TriggeredSchedule():
            return "only when triggered"
    return str(schedule)
