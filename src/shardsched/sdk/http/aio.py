"""The async HTTP client, for trio and asyncio programs alike (``httpx`` on anyio):
every operation of the SDK's table as an ``async`` method; results and exceptions as
the Redis SDK's."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import httpx

from shardsched.core.models import JobSpec
from shardsched.core.views import JobCreated
from shardsched.sdk import pages, plans
from shardsched.sdk.http.calls import HttpCall, result
from shardsched.sdk.http.routes import apps, config, dags, events, jobs, runs
from shardsched.sdk.http.transport import Options, pause_after, unreachable

P = ParamSpec("P")
T = TypeVar("T")


def awaiting(
    route: Callable[P, HttpCall[T]],
) -> Callable[Concatenate[AsyncHttpClient, P], Coroutine[Any, Any, T]]:
    """The route as an ``async`` method of :class:`AsyncHttpClient`."""

    @functools.wraps(route)
    async def method(self: AsyncHttpClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(route(*args, **kwargs))

    # help() and IDEs read the route's arguments, after ``self``
    own = inspect.signature(route)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    result = str(own.return_annotation).removeprefix("HttpCall[").removesuffix("]")
    method.__signature__ = own.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *own.parameters.values()], return_annotation=result
    )
    return method


class AsyncHttpClient:
    """An async handle on one deployment through its HTTP API (trio or asyncio)::

        async with await shardsched.AsyncClient.open("https://sched", token=t) as client:
            job = await client.get_job(job_id)

    Arguments as :class:`~.sync.HttpClient`'s."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        token_file: str | None = None,
        profile: str | None = None,
        ca_file: str | None = None,
        retries: int = 4,
        timeout_s: float | None = None,
    ) -> None:
        self.options = Options.of(url, token, token_file, profile, ca_file, retries, timeout_s)
        self._http = httpx.AsyncClient(**self.options.client_kwargs())

    async def send(self, call: HttpCall[T]) -> T:
        """Send one call, again while :func:`~.transport.pause_after` says so."""
        attempt, started = 0, time.monotonic()
        while True:
            attempt += 1
            outcome: httpx.Response | Exception
            try:
                outcome = await self._http.request(
                    call.method, call.path, **self.options.request_kwargs(call)
                )
            except httpx.TransportError as exc:
                outcome = exc
            spent = time.monotonic() - started
            pause = pause_after(self.options, call, attempt, outcome, spent)
            if pause is None:
                if isinstance(outcome, Exception):
                    raise unreachable(self.options, call, outcome) from outcome
                return result(call, outcome.status_code, outcome.content, outcome.headers)
            await anyio.sleep(pause)

    async def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        """As :meth:`~.sync.HttpClient.add_jobs`."""
        out: list[JobCreated] = []
        with plans.bulk_progress(out):
            for chunk in plans.validated_batches(specs, batch):
                for spec in chunk:
                    out.append(await self.add_job(spec))
        return out

    each = staticmethod(pages.aeach)

    # the operations (sdk/operations.py's table; their routes in sdk/http/routes/)
    add_job = awaiting(jobs.add_job)
    put_job = awaiting(jobs.put_job)
    get_job = awaiting(jobs.get_job)
    jobs_named = awaiting(jobs.jobs_named)
    list_jobs = awaiting(jobs.list_jobs)
    update_job = awaiting(jobs.update_job)
    pause = awaiting(jobs.pause)
    resume = awaiting(jobs.resume)
    delete_job = awaiting(jobs.delete_job)
    restore_job = awaiting(jobs.restore_job)
    trigger = awaiting(jobs.trigger)
    job_versions = awaiting(jobs.job_versions)
    job_stats = awaiting(jobs.job_stats)
    upcoming_fires = awaiting(jobs.upcoming_fires)
    resume_job = awaiting(jobs.resume_job)
    job_changes = awaiting(jobs.job_changes)
    list_events = awaiting(jobs.list_events)
    dag_changes = awaiting(dags.dag_changes)
    backfill = awaiting(jobs.backfill)
    next_fire_times = awaiting(jobs.next_fire_times)
    get_run = awaiting(runs.get_run)
    list_runs = awaiting(runs.list_runs)
    get_output = awaiting(runs.get_output)
    list_dead_letter = awaiting(runs.list_dead_letter)
    list_failures = awaiting(runs.list_failures)
    retry_run = awaiting(runs.retry_run)
    cancel_run = awaiting(runs.cancel_run)
    retry_runs = awaiting(runs.retry_runs)
    cancel_dag_run = awaiting(runs.cancel_dag_run)
    clear_task = awaiting(runs.clear_task)
    mark_task = awaiting(runs.mark_task)
    list_runs_under_way = awaiting(runs.list_runs_under_way)
    put_channel = awaiting(config.put_channel)
    list_channels = awaiting(config.list_channels)
    delete_channel = awaiting(config.delete_channel)
    add_rule = awaiting(config.add_rule)
    put_rule = awaiting(config.put_rule)
    list_rules = awaiting(config.list_rules)
    delete_rule = awaiting(config.delete_rule)
    test_channel = awaiting(config.test_channel)
    list_deliveries = awaiting(config.list_deliveries)
    get_delivery = awaiting(config.get_delivery)
    put_calendar = awaiting(config.put_calendar)
    get_calendar = awaiting(config.get_calendar)
    list_calendars = awaiting(config.list_calendars)
    delete_calendar = awaiting(config.delete_calendar)
    add_dag = awaiting(dags.add_dag)
    put_dag = awaiting(dags.put_dag)
    get_dag = awaiting(dags.get_dag)
    list_dags = awaiting(dags.list_dags)
    pause_dag = awaiting(dags.pause_dag)
    resume_dag = awaiting(dags.resume_dag)
    delete_dag = awaiting(dags.delete_dag)
    restore_dag = awaiting(dags.restore_dag)
    trigger_dag = awaiting(dags.trigger_dag)
    list_dag_runs = awaiting(dags.list_dag_runs)
    get_dag_run = awaiting(dags.get_dag_run)
    set_concurrency_limits = awaiting(config.set_concurrency_limits)
    clear_concurrency_limits = awaiting(config.clear_concurrency_limits)
    get_concurrency_key = awaiting(config.get_concurrency_key)
    list_concurrency_keys = awaiting(config.list_concurrency_keys)
    deploy_app = awaiting(apps.deploy_app)
    emit = awaiting(events.emit)
    get_event = awaiting(events.get_event)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncHttpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
