"""``shardsched.AsyncClient``: the SDK for trio programs, on shardsched's own trio
connection pool; every operation of :mod:`.plans` as an ``async`` method."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

import msgspec

from shardsched import ops
from shardsched.core.access import SDK_ACTOR
from shardsched.core.errors import Unreachable
from shardsched.core.models import JobSpec
from shardsched.core.views import JobCreated
from shardsched.sdk import pages, plans
from shardsched.sdk.plans import (
    apps,
    concurrency,
    dags,
    events,
    jobs,
    notify,
    runs,
    schedules,
    ticks,
)
from shardsched.store.drive import drive_async, drive_off_loop
from shardsched.store.keys import DEFAULT_NAMESPACE
from shardsched.store.redis import RedisConnectionError

P = ParamSpec("P")
T = TypeVar("T")


def awaitable(
    plan: Callable[Concatenate[plans.Handle, P], plans.Plan[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """The plan as an ``async`` method of :class:`AsyncClient` that runs it."""

    @functools.wraps(plan)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await self._run(plan(self, *args, **kwargs).op)
        return result

    return method


class AsyncClient:
    """The same operations for trio programs, on shardsched's own trio connection pool:
    every method returns an awaitable of what :class:`Client`'s returns.

        async with await AsyncClient.open("redis://127.0.0.1:6379/0") as client:
            job = await client.get_job(job_id)
    """

    def __init__(self, redis: Any, deployment: ops.Deployment, actor: str = SDK_ACTOR) -> None:
        self._redis = redis
        self.deployment = deployment
        self.actor = actor

    @classmethod
    async def open(
        cls,
        redis_url: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        actor: str = SDK_ACTOR,
        **http: Any,
    ) -> AsyncClient:
        """``actor``: who the job versions and change logs record as making its changes.

        ``http://…`` or ``https://…`` (or no URL: the one the environment or the CLI's
        config profile names) opens an :class:`~shardsched.sdk.http.AsyncHttpClient`
        instead, for trio or asyncio: the same operations through the HTTP API, with a
        token (``token=``, ``token_file=``, ``profile=``, ``ca_file=``, ``retries=``,
        ``timeout_s=``)."""
        if redis_url is None or redis_url.startswith(("http://", "https://")):
            from shardsched.sdk.http import AsyncHttpClient

            if namespace != DEFAULT_NAMESPACE or actor != SDK_ACTOR:
                raise TypeError(
                    "namespace= and actor= are the Redis client's: through the API, the"
                    " token says who makes a change"
                )
            return AsyncHttpClient(redis_url, **http)  # type: ignore[return-value]
        if http:
            raise TypeError(f"a Redis URL takes no {', '.join(sorted(http))}")
        from shardsched.store.redis import connect, use_durability

        redis = connect(redis_url, size=4)
        try:
            deployment = await drive_async(ops.open_deployment(namespace, None), redis)
            use_durability(redis, deployment)
        except BaseException:
            await redis.aclose()
            raise
        return cls(redis, deployment, actor)

    async def _run(self, op: ops.Op) -> Any:
        try:
            return await drive_off_loop(op, self._redis)
        except msgspec.ValidationError as exc:
            raise plans.as_validation_error(exc) from None
        except RedisConnectionError as exc:
            raise Unreachable(f"cannot reach Redis: {exc}") from exc

    each = staticmethod(pages.aeach)

    async def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        """As :meth:`Client.add_jobs`."""
        out: list[JobCreated] = []
        for chunk in plans.validated_batches(specs, batch):
            with plans.bulk_progress(out):
                out += await self._run(jobs.add_validated(self, chunk).op)
        return out

    # the operations (sdk/operations.py's table; the plans in sdk/plans/), awaitable
    add_job = awaitable(jobs.add_job)
    put_job = awaitable(jobs.put_job)
    get_job = awaitable(jobs.get_job)
    jobs_named = awaitable(jobs.jobs_named)
    list_jobs = awaitable(jobs.list_jobs)
    update_job = awaitable(jobs.update_job)
    pause = awaitable(jobs.pause)
    resume = awaitable(jobs.resume)
    delete_job = awaitable(jobs.delete_job)
    restore_job = awaitable(jobs.restore_job)
    restore_dag = awaitable(dags.restore_dag)
    trigger = awaitable(jobs.trigger)
    job_versions = awaitable(jobs.job_versions)
    job_stats = awaitable(ticks.job_stats)
    upcoming_fires = awaitable(ticks.upcoming_fires)
    resume_job = awaitable(ticks.resume_job)
    job_changes = awaitable(jobs.job_changes)
    list_events = awaitable(runs.list_events)
    dag_changes = awaitable(dags.dag_changes)
    backfill = awaitable(ticks.backfill)
    next_fire_times = awaitable(schedules.next_fire_times)
    get_run = awaitable(runs.get_run)
    list_runs = awaitable(runs.list_runs)
    get_output = awaitable(runs.get_output)
    list_dead_letter = awaitable(runs.list_dead_letter)
    list_failures = awaitable(runs.list_failures)
    retry_run = awaitable(runs.retry_run)
    cancel_run = awaitable(runs.cancel_run)
    retry_runs = awaitable(runs.retry_runs)
    cancel_dag_run = awaitable(dags.cancel_dag_run)
    clear_task = awaitable(dags.clear_task)
    mark_task = awaitable(dags.mark_task)
    list_runs_under_way = awaitable(runs.list_runs_under_way)
    put_channel = awaitable(notify.put_channel)
    list_channels = awaitable(notify.list_channels)
    delete_channel = awaitable(notify.delete_channel)
    add_rule = awaitable(notify.add_rule)
    put_rule = awaitable(notify.put_rule)
    list_rules = awaitable(notify.list_rules)
    delete_rule = awaitable(notify.delete_rule)
    test_channel = awaitable(notify.test_channel)
    list_deliveries = awaitable(notify.list_deliveries)
    get_delivery = awaitable(notify.get_delivery)
    put_calendar = awaitable(schedules.put_calendar)
    get_calendar = awaitable(schedules.get_calendar)
    list_calendars = awaitable(schedules.list_calendars)
    delete_calendar = awaitable(schedules.delete_calendar)
    add_dag = awaitable(dags.add_dag)
    put_dag = awaitable(dags.put_dag)
    get_dag = awaitable(dags.get_dag)
    list_dags = awaitable(dags.list_dags)
    pause_dag = awaitable(dags.pause_dag)
    resume_dag = awaitable(dags.resume_dag)
    delete_dag = awaitable(dags.delete_dag)
    trigger_dag = awaitable(dags.trigger_dag)
    list_dag_runs = awaitable(dags.list_dag_runs)
    get_dag_run = awaitable(dags.get_dag_run)
    set_concurrency_limits = awaitable(concurrency.set_concurrency_limits)
    clear_concurrency_limits = awaitable(concurrency.clear_concurrency_limits)
    get_concurrency_key = awaitable(concurrency.get_concurrency_key)
    list_concurrency_keys = awaitable(concurrency.list_concurrency_keys)
    deploy_app = awaitable(apps.deploy_app)
    emit = awaitable(events.emit)
    get_event = awaitable(events.get_event)

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
