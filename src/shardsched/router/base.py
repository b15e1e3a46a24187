"""What every handler of the API shares: the Redis pool, the deployment, running an
operation (its errors mapped to the API's statuses once), and the team check on an id."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request

from shardsched import ops
from shardsched.core.errors import (
    AlreadyRetried,
    ConflictError,
    DagNotFound,
    IdempotencyKeyReused,
    IdTaken,
    JobNotFound,
    NotFoundError,
    PreconditionFailed,
    RunNotFound,
    ValidationError,
)
from shardsched.core.ids import dag_id_of
from shardsched.ops import access
from shardsched.router import http
from shardsched.router.guards import who
from shardsched.runtime.metrics import Metrics
from shardsched.store.drive import drive_off_loop
from shardsched.store.redis import Redis


class ApiBase:
    """Bound to one Redis pool and one deployment."""

    def __init__(self, redis: Redis, dep: ops.Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics

    async def _run(self, op: ops.Op) -> Any:
        try:
            return await drive_off_loop(op, self.redis)
        except ValidationError as exc:  # ours first: it is a msgspec.ValidationError too
            raise http.validation(exc.message, exc.field) from None
        except msgspec.ValidationError as exc:
            raise http.invalid(exc) from None
        except NotFoundError as exc:
            raise http.ApiError(404, "not_found", str(exc)) from None
        except PreconditionFailed as exc:
            details = {"id": exc.id, "expected": exc.expected, "current": exc.current}
            raise http.ApiError(412, "precondition_failed", str(exc), details) from None
        except IdTaken as exc:
            raise http.ApiError(409, "id_taken", str(exc), {"id": exc.id}) from None
        except AlreadyRetried as exc:
            details = {"run_id": exc.run_id, "next_run_id": exc.next_run_id}
            raise http.ApiError(409, "already_retried", str(exc), details) from None
        except IdempotencyKeyReused as exc:
            details = {"idempotency_key": exc.key, "run_id": exc.run_id}
            raise http.ApiError(409, "idempotency_key_reused", str(exc), details) from None
        except ConflictError as exc:
            raise http.ApiError(409, "conflict", str(exc)) from None

    async def _visible(self, request: Request, any_id: str, missing: NotFoundError) -> None:
        """404 (as for an unknown id) unless the caller's team owns ``any_id``."""
        await self._run(access.require_visible(self.dep, who(request), any_id, missing))

    async def _not_others(self, request: Request, any_id: str, missing: NotFoundError) -> None:
        """A put by a team's token: the id is free or the team's own; another team's id
        answers ``missing``, exactly as an unknown id does elsewhere, so a team learns
        nothing of another's ids."""
        await self._run(access.require_free_or_own(self.dep, who(request), any_id, missing))

    async def _dependencies(self, request: Request, depends_on: list[str]) -> None:
        """A team's job may depend only on its own DAG's tasks: another team's is a 404,
        as an unknown one is (and nothing is written)."""
        for dep_id in depends_on:
            await self._visible(request, dep_id, JobNotFound(dep_id))

    async def _job(self, request: Request) -> str:
        job_id: str = request.path_params["job_id"]
        await self._visible(request, job_id, JobNotFound(job_id))
        return job_id

    async def _dag(self, request: Request) -> str:
        dag_id = dag_id_of(request.path_params["dag_id"])  # ``etl`` names ``dag_etl``
        await self._visible(request, dag_id, DagNotFound(dag_id))
        return dag_id

    async def _run_id(self, request: Request) -> str:
        rid: str = request.path_params["run_id"]
        await self._visible(request, rid, RunNotFound(rid))
        return rid
