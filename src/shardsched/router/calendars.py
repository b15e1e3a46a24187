"""A schedule's days and times: a schedule's next fire times (preview, with the calendars it
names) and named calendars (core/calendars.py). Reading needs a read token; changing a
calendar, a write token not bound to a team, since a calendar is the deployment's and
decides the ticks of every job that names it."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core import views as v
from shardsched.core.access import Scope
from shardsched.core.calendars import Calendar, CalendarList, CalendarView
from shardsched.core.models import SchedulePreviewRequest
from shardsched.core.notify_views import Removed
from shardsched.ops.schedules import calendars
from shardsched.ops.schedules.preview import preview_with_calendars
from shardsched.router import http
from shardsched.router.context import Context
from shardsched.router.guards import unbound
from shardsched.router.operation import BODY_ERRORS, Operation

_preview_decoder = msgspec.json.Decoder(SchedulePreviewRequest)
_calendar = msgspec.json.Decoder(Calendar)
_BASE = "/api/v1/notifications"
_BASE = "/api/v1/calendars"


async def preview(cx: Context, request: Request) -> Response:
    body = await http.decode(request, _preview_decoder)
    return http.json_response(await cx.run(preview_with_calendars(cx.dep, body)))


async def list_calendars(cx: Context, request: Request) -> Response:
    return http.json_response(await cx.run(calendars.list_calendars(cx.dep)))


async def get_calendar(cx: Context, request: Request) -> Response:
    name = request.path_params["name"]
    return http.json_response(await cx.run(calendars.get_calendar(cx.dep, name)))


async def put_calendar(cx: Context, request: Request) -> Response:
    unbound(request)
    body = await http.decode(request, _calendar)
    name = request.path_params["name"]
    view, created = await cx.run(calendars.put_calendar(cx.dep, name, body))
    return http.json_response(view, 201 if created else 200)


async def delete_calendar(cx: Context, request: Request) -> Response:
    unbound(request)
    name = request.path_params["name"]
    await cx.run(calendars.delete_calendar(cx.dep, name))
    return http.json_response(Removed(removed=name))


ROUTES: tuple[Operation, ...] = (
    Operation(
        "post",
        "/api/v1/schedules/preview",
        "The next fire times of a schedule",
        v.SchedulePreview,
        body=SchedulePreviewRequest,
        errors=BODY_ERRORS,
        tags=("schedules",),
        handler=preview,
        operation_id="preview_schedule",
        scope=Scope.READ,  # computes, changes nothing
    ),
    Operation(
        "get",
        _BASE,
        "Named calendars: the days (dates, ranges, weekdays) schedules include or exclude",
        CalendarList,
        tags=("calendars",),
        handler=list_calendars,
    ),
    Operation(
        "get",
        _BASE + "/{name}",
        "A named calendar",
        CalendarView,
        errors=(404,),
        tags=("calendars",),
        handler=get_calendar,
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
        handler=put_calendar,
    ),
    Operation(
        "delete",
        _BASE + "/{name}",
        "Remove a calendar (a job that still names it sees no day in it)",
        Removed,
        errors=(403, 404),
        tags=("calendars",),
        handler=delete_calendar,
    ),
)
