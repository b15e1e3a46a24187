"""Managing named calendars (core/calendars.py), shared by the API, the SDK and the CLI.

Every change increments the version each node watches (shard/calendar_book.py), so a
calendar put or deleted here decides the next tick of every job that names it, on every
owner, within a second. A job may only name calendars that exist when it is created or
changed; a calendar a job still names may be deleted (its jobs then see no day in it,
as core/calendars.py says), and the answer names those jobs' count so it is a choice."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from shardsched.core.calendars import (
    CALENDAR_NAME,
    Calendar,
    CalendarList,
    CalendarRule,
    CalendarView,
)
from shardsched.core.errors import NotFoundError, ValidationError
from shardsched.store.calendars import CALENDAR, CALENDARS_CHANGED
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.records import decoded_entries


def put_calendar(dep: Deployment, name: str, calendar: Calendar) -> Op:
    """Add or replace a calendar; returns (CalendarView, created)."""
    calendar.check(name)
    keys = dep.globals.calendars
    added, _, _ = yield [
        Call(("HSET", keys.book, name, msgspec.json.encode(calendar))),
        Call(("INCR", keys.version)),
        Call(("PUBLISH", dep.globals.wake_channel, CALENDARS_CHANGED)),
    ]
    return CalendarView.of(name, calendar), check(added) == 1


def list_calendars(dep: Deployment) -> Op:
    (raw,) = yield [Call(("HGETALL", dep.globals.calendars.book))]
    views = [CalendarView.of(n, c) for n, c in decoded_entries(check(raw), CALENDAR)]
    return CalendarList(calendars=sorted(views, key=lambda v: v.name))


def get_calendar(dep: Deployment, name: str) -> Op:
    (raw,) = yield [Call(("HGET", dep.globals.calendars.book, name))]
    if check(raw) is None:
        raise NotFoundError(f"calendar {name!r} not found")
    return CalendarView.of(name, CALENDAR.decode(raw))


def delete_calendar(dep: Deployment, name: str) -> Op:
    keys = dep.globals.calendars
    removed, _, _ = yield [
        Call(("HDEL", keys.book, name)),
        Call(("INCR", keys.version)),
        Call(("PUBLISH", dep.globals.wake_channel, CALENDARS_CHANGED)),
    ]
    if not check(removed):
        raise NotFoundError(f"calendar {name!r} not found")


def require_calendars(dep: Deployment, rules: Iterable[CalendarRule | None]) -> Op:
    """ValidationError (422) naming the calendars the rules name that do not exist."""
    names = sorted({n for r in rules if r is not None for n in r.names()})
    if not names:
        return
    bad = [n for n in names if not CALENDAR_NAME.match(n)]
    (known,) = yield [Call(("HMGET", dep.globals.calendars.book, *names))]
    missing = bad + [n for n, v in zip(names, check(known), strict=True) if v is None]
    if missing:
        raise ValidationError(f"no such calendar: {', '.join(missing)}", "$.calendars")
