"""The handlers of a schedule's time: a job's and a DAG's accounting (``GET
/jobs/{id}/stats``, ``GET /dags/{id}/stats``: ops/job_stats.py) and a resume that chooses
what to do with the ticks of the pause (``POST /jobs/{id}/resume``: ops/resume.py)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.backfill import ResumeRequest
from shardsched.ops.job_stats import job_stats
from shardsched.ops.resume import resume_job
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.guards import who
from shardsched.router.schemas import StatsQuery


class TimeHandlers(ApiBase):
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
