"""The blocking HTTP client: every operation of the SDK's table as a method that sends
its route (:mod:`.routes`) over ``httpx``, with the token, CA and retries of
:mod:`.transport`; results and exceptions as the Redis SDK's."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterable
from typing import Concatenate, ParamSpec, TypeVar

import httpx

from shardsched.core.models import JobSpec
from shardsched.core.views import JobCreated
from shardsched.sdk import pages, plans
from shardsched.sdk.http.calls import HttpCall, result
from shardsched.sdk.http.routes import apps, config, dags, events, jobs, runs
from shardsched.sdk.http.transport import Options, pause_after, unreachable

P = ParamSpec("P")
T = TypeVar("T")


def sending(
    route: Callable[P, HttpCall[T]],
) -> Callable[Concatenate[HttpClient, P], T]:
    """The route as a method of :class:`HttpClient` that sends it and returns its result."""

    @functools.wraps(route)
    def method(self: HttpClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(route(*args, **kwargs))

    # help() and IDEs read the route's arguments, after ``self``
    own = inspect.signature(route)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    result = str(own.return_annotation).removeprefix("HttpCall[").removesuffix("]")
    method.__signature__ = own.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *own.parameters.values()], return_annotation=result
    )
    return method


class HttpClient:
    """A blocking handle on one shardsched deployment through its HTTP API.

        with shardsched.Client("https://sched.internal", token=token) as client:
            job = client.get_job(job_id)

    ``url``, ``token`` and ``ca_file`` default to the environment and the CLI's config
    profile (:mod:`.settings`); ``retries``: how many times a call is sent again (see
    :mod:`.transport`); ``timeout_s``: how long an answer may take."""

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
        self._http = httpx.Client(**self.options.client_kwargs())

    def send(self, call: HttpCall[T]) -> T:
        """Send one call, again while :func:`~.transport.pause_after` says so."""
        attempt, started = 0, time.monotonic()
        while True:
            attempt += 1
            outcome: httpx.Response | Exception
            try:
                outcome = self._http.request(
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
            time.sleep(pause)

    def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        """Register many jobs: every spec validated before anything is sent, then one
        request each (``batch`` is the Redis client's; the API takes one job a request).
        Raises BulkPartiallyApplied, listing those registered, if a request fails after
        the first."""
        out: list[JobCreated] = []
        with plans.bulk_progress(out):
            for chunk in plans.validated_batches(specs, batch):
                out += [self.add_job(spec) for spec in chunk]
        return out

    each = staticmethod(pages.each)

    # the operations (sdk/operations.py's table; their routes in sdk/http/routes/)
    add_job = sending(jobs.add_job)
    put_job = sending(jobs.put_job)
    get_job = sending(jobs.get_job)
    jobs_named = sending(jobs.jobs_named)
    list_jobs = sending(jobs.list_jobs)
    update_job = sending(jobs.update_job)
    pause = sending(jobs.pause)
    resume = sending(jobs.resume)
    delete_job = sending(jobs.delete_job)
    restore_job = sending(jobs.restore_job)
    trigger = sending(jobs.trigger)
    job_versions = sending(jobs.job_versions)
    job_stats = sending(jobs.job_stats)
    upcoming_fires = sending(jobs.upcoming_fires)
    resume_job = sending(jobs.resume_job)
    job_changes = sending(jobs.job_changes)
    list_events = sending(jobs.list_events)
    dag_changes = sending(dags.dag_changes)
    backfill = sending(jobs.backfill)
    next_fire_times = sending(jobs.next_fire_times)
    get_run = sending(runs.get_run)
    list_runs = sending(runs.list_runs)
    get_output = sending(runs.get_output)
    list_dead_letter = sending(runs.list_dead_letter)
    list_failures = sending(runs.list_failures)
    retry_run = sending(runs.retry_run)
    cancel_run = sending(runs.cancel_run)
    retry_runs = sending(runs.retry_runs)
    cancel_dag_run = sending(runs.cancel_dag_run)
    clear_task = sending(runs.clear_task)
    mark_task = sending(runs.mark_task)
    list_runs_under_way = sending(runs.list_runs_under_way)
    put_channel = sending(config.put_channel)
    list_channels = sending(config.list_channels)
    delete_channel = sending(config.delete_channel)
    add_rule = sending(config.add_rule)
    put_rule = sending(config.put_rule)
    list_rules = sending(config.list_rules)
    delete_rule = sending(config.delete_rule)
    test_channel = sending(config.test_channel)
    list_deliveries = sending(config.list_deliveries)
    get_delivery = sending(config.get_delivery)
    put_calendar = sending(config.put_calendar)
    get_calendar = sending(config.get_calendar)
    list_calendars = sending(config.list_calendars)
    delete_calendar = sending(config.delete_calendar)
    add_dag = sending(dags.add_dag)
    put_dag = sending(dags.put_dag)
    get_dag = sending(dags.get_dag)
    list_dags = sending(dags.list_dags)
    pause_dag = sending(dags.pause_dag)
    resume_dag = sending(dags.resume_dag)
    delete_dag = sending(dags.delete_dag)
    restore_dag = sending(dags.restore_dag)
    trigger_dag = sending(dags.trigger_dag)
    list_dag_runs = sending(dags.list_dag_runs)
    get_dag_run = sending(dags.get_dag_run)
    set_concurrency_limits = sending(config.set_concurrency_limits)
    clear_concurrency_limits = sending(config.clear_concurrency_limits)
    get_concurrency_key = sending(config.get_concurrency_key)
    list_concurrency_keys = sending(config.list_concurrency_keys)
    deploy_app = sending(apps.deploy_app)
    emit = sending(events.emit)
    get_event = sending(events.get_event)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
