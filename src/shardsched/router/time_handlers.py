"""The handlers of a schedule's time: named calendars (:mod:`.calendar_routes`), a job's
and a DAG's accounting (``GET /jobs/{id}/stats``, ``GET /dags/{id}/stats``:
ops/job_stats.py) and a resume that chooses what to do with the ticks of the pause
(``POST /jobs/{id}/resume``: ops/resume.py)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.backfill import ResumeRequest
from shardsched.core.calendars import Calendar
from shardsched.core.notify_views import Removed
from shardsched.ops import calendars
from shardsched.ops.job_stats import job_stats
from shardsched.ops.resume import resume_job
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.guards import unbound, who
from shardsched.router.schemas import StatsQuery


class TimeHandlers(ApiBase):
    async def list_calendars(self, request: Request) -> Response:
        return http.json_response(await self._run(calendars.list_calendars(self.dep)))

    async def get_calendar(self, request: Request) -> Response:
        name = request.path_params["name"]
        return http.json_response(await self._run(calendars.get_calendar(self.dep, name)))

    async def put_calendar(self, request: Request) -> Response:
        unbound(request)
        body = await http.decode(request, _calendar)
        name = request.path_params["name"]
        view, created = await self._run(calendars.put_calendar(self.dep, name, body))
        return http.json_response(view, 201 if created else 200)

    async def delete_calendar(self, request: Request) -> Response:
        unbound(request)
        name = request.path_params["name"]
        await self._run(calendars.delete_calendar(self.dep, name))
        return http.json_response(Removed(removed=name))

    async def job_stats(self, request: Request) -> Response:
        return await self._stats(request, await self._job(request))

    async def dag_stats(self, request: Request) -> Response:
        return await self._stats(request, await self._dag(request))

    async def _stats(self, request: Request, any_id: str) -> Response:
        q: StatsQuery = http.query(request, StatsQuery)
        op = job_stats(self.dep, any_id, http.ms(q.since), http.ms(q.until))
        return http.json_response(await self._run(op))

    async def resume_job(self, request: Request) -> Response:
        job_id = await self._job(request)
        body = await http.optional_body(request, _resume) or ResumeRequest()
        op = resume_job(self.dep, job_id, body, who(request).name)
        return http.json_response(await self._run(op))


_resume = msgspec.json.Decoder(ResumeRequest)
_calendar = msgspec.json.Decoder(Calendar)
