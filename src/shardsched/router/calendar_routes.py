"""The routes of named calendars (core/calendars.py): put, list, read and delete. Reading
needs a read token; changing one, a write token not bound to a team, since a calendar is
the deployment's and decides the ticks of every job that names it. Part of the route
table (:mod:`.routes`)."""

from __future__ import annotations

from shardsched.core.calendars import Calendar, CalendarList, CalendarView
from shardsched.core.notify_views import Removed
from shardsched.router.operation import BODY_ERRORS, Operation

_BASE = "/api/v1/calendars"

CALENDAR_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "get",
        _BASE,
        "Named calendars: the days (dates, ranges, weekdays) schedules include or exclude",
        CalendarList,
        tags=("calendars",),
        handler="list_calendars",
    ),
    Operation(
        "get",
        _BASE + "/{name}",
        "A named calendar",
        CalendarView,
        errors=(404,),
        tags=("calendars",),
        handler="get_calendar",
    ),
    Operation(
        "put",
        _BASE + "/{name}",
        "Add or replace a calendar; every job naming it decides its next tick with it",
        CalendarView,
        200,
        Calendar,
        errors=(*BODY_ERRORS, 403),
        tags=("calendars",),
        handler="put_calendar",
    ),
    Operation(
        "delete",
        _BASE + "/{name}",
        "Remove a calendar (a job that still names it sees no day in it)",
        Removed,
        errors=(403, 404),
        tags=("calendars",),
        handler="delete_calendar",
    ),
)
