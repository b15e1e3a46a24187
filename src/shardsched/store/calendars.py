"""The calendar book as stored: reading it whole (what an owner decides ticks with, and
what a preview or a resume decides with), and the message a change of it publishes on
the wake channel so that every node reads it again (shard/calendar_book.py). Managing
calendars is ops/schedules/calendars.py's."""

from __future__ import annotations

import msgspec

from shardsched.core.calendars import Calendar
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.records import decoded_entries

#: What a change publishes on the wake channel: every node reads the calendars again.
CALENDARS_CHANGED = b"calendars"

CALENDAR = msgspec.json.Decoder(Calendar)


def read_book(dep: Deployment) -> Op:
    """Every calendar, by name; one a later version wrote in a shape this one cannot read
    is left out."""
    (raw,) = yield [Call(("HGETALL", dep.globals.calendars.book))]
    return dict(decoded_entries(check(raw), CALENDAR))
