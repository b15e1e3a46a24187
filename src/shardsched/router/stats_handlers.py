"""The handler of a job's and a DAG's accounting (``GET /jobs/{id}/stats``,
``GET /dags/{id}/stats``: ops/job_stats.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from shardsched.ops.job_stats import job_stats
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.schemas import StatsQuery


class StatsHandlers(ApiBase):
    async def job_stats(self, request: Request) -> Response:
        return await self._stats(request, await self._job(request))

    async def dag_stats(self, request: Request) -> Response:
        return await self._stats(request, await self._dag(request))

    async def _stats(self, request: Request, any_id: str) -> Response:
        q: StatsQuery = http.query(request, StatsQuery)
        op = job_stats(self.dep, any_id, http.ms(q.since), http.ms(q.until))
        return http.json_response(await self._run(op))
