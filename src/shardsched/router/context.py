"""What every handler of the API shares: the Redis pool, the deployment, running an
operation (its errors mapped to the API's statuses once), the team check on an id, and the
process's live streams. A handler is a function of the context and the request, listed
beside its route in its resource's module (:mod:`.jobs`, :mod:`.runs`, ...)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

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
from shardsched.core.events import SELECTOR, OnRule, upstream_of
from shardsched.core.ids import dag_id_of
from shardsched.core.views import Dag, Job
from shardsched.ops.access import teams
from shardsched.ops.jobs.declare import Outcome
from shardsched.router import http
from shardsched.router.event_hub import EventHub
from shardsched.router.guards import who
from shardsched.router.sse import EVENT_POLL_S, CountedStream, StreamSlots
from shardsched.runtime.metrics import Metrics
from shardsched.store.drive import drive_off_loop
from shardsched.store.redis import Redis


class Context:
    """Bound to one Redis pool and one deployment; one per app."""

    def __init__(self, redis: Redis, dep: ops.Deployment, metrics: Metrics) -> None:
        self.redis = redis
        self.dep = dep
        self.metrics = metrics
        self.streams = StreamSlots()
        self.hub = EventHub(dep, self.run, lambda: self.redis.time_ms(), EVENT_POLL_S)

    async def run(self, op: ops.Op) -> Any:
        try:
            return await drive_off_loop(op, self.redis)
        except ValidationError as exc:  # ours first: it is a msgspec.ValidationError too
            raise http.validation(exc.message, exc.field) from None
        except msgspec.ValidationError as exc:
            raise http.invalid(exc) from None
        except NotFoundError as exc:
            raise http.ApiError(404, "not_found", str(exc), typed(exc)) from None
        except PreconditionFailed as exc:
            raise http.ApiError(412, "precondition_failed", str(exc), typed(exc)) from None
        except IdTaken as exc:
            raise http.ApiError(409, "id_taken", str(exc), typed(exc)) from None
        except AlreadyRetried as exc:
            raise http.ApiError(409, "already_retried", str(exc), typed(exc)) from None
        except IdempotencyKeyReused as exc:
            details = {"idempotency_key": exc.key, **typed(exc)}
            raise http.ApiError(409, "idempotency_key_reused", str(exc), details) from None
        except ConflictError as exc:
            raise http.ApiError(409, "conflict", str(exc), typed(exc)) from None

    async def visible(self, request: Request, any_id: str, missing: NotFoundError) -> None:
        """404 (as for an unknown id) unless the caller's team owns ``any_id``."""
        await self.run(teams.require_visible(self.dep, who(request), any_id, missing))

    async def not_others(self, request: Request, any_id: str, missing: NotFoundError) -> None:
        """A put by a team's token: the id is free or the team's own; another team's id
        answers ``missing``, exactly as an unknown id does elsewhere, so a team learns
        nothing of another's ids."""
        await self.run(teams.require_free_or_own(self.dep, who(request), any_id, missing))

    async def dependencies(self, request: Request, depends_on: list[str]) -> None:
        """A team's job may depend only on its own DAG's tasks: another team's is a 404,
        as an unknown one is (and nothing is written)."""
        for dep_id in depends_on:
            await self.visible(request, dep_id, JobNotFound(dep_id))

    async def upstreams(self, request: Request, rules: list[OnRule] | None) -> None:
        """A team's job or DAG may run after its own only: another team's upstream is
        refused exactly as an unknown one is (422), so a team learns nothing of another's
        ids or outcomes."""
        caller = who(request)
        if not caller.bound or not rules:
            return
        for i, rule in enumerate(rules):
            if rule.after is None:
                continue
            if rule.after.startswith(SELECTOR):  # it would name other teams' jobs too
                raise http.validation(
                    "a team's token runs after its own jobs by id, not by labels",
                    f"$.on[{i}].after",
                )
            name = await self.run(teams.owner_name(self.dep, upstream_of(rule.after)))
            if name is not None and not caller.sees(name):
                raise http.validation(
                    f"{rule.after}: there is no such job, task or DAG to run after",
                    f"$.on[{i}].after",
                )

    async def job(self, request: Request) -> str:
        job_id: str = request.path_params["job_id"]
        await self.visible(request, job_id, JobNotFound(job_id))
        return job_id

    async def dag(self, request: Request) -> str:
        dag_id = dag_id_of(request.path_params["dag_id"])  # ``etl`` names ``dag_etl``
        await self.visible(request, dag_id, DagNotFound(dag_id))
        return dag_id

    async def run_id(self, request: Request) -> str:
        rid: str = request.path_params["run_id"]
        await self.visible(request, rid, RunNotFound(rid))
        return rid

    def stream(self, request: Request, body: AsyncIterator[bytes]) -> Response:
        """``body`` as Server-Sent Events, holding one of the caller's stream slots while
        it lasts (a 429 when the caller or the process is at the cap)."""
        holder = who(request).name
        self.streams.take(holder)
        return CountedStream(body, self.streams, holder)


def typed(exc: Exception) -> dict[str, Any]:
    """An error answer's details: the exception's type and what it carries (``job_id``,
    ``expected``...), so a client can raise the very exception the service raised."""
    kept = {k: v for k, v in vars(exc).items() if isinstance(v, str | int | list | None)}
    return {**kept, "type": type(exc).__name__}


#: A route's handler: what answers a request, given the app's context.
Handler = Callable[[Context, Request], Awaitable[Response]]


def put_answer(obj: Job | Dag, outcome: Outcome) -> Response:
    """A PUT's answer: 201 when it created, else 200; what it did, and the version."""
    response = http.json_response(obj, 201 if outcome == Outcome.CREATED else 200)
    response.headers["shardsched-outcome"] = outcome.value
    return http.etag(response, obj.version)
