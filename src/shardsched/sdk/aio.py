"""``shardsched.AsyncClient``: the SDK for trio programs, on shardsched's own trio
connection pool; every operation of :mod:`.plans` as an ``async`` method."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

import msgspec

from shardsched import ops
from shardsched.core.access import SDK_ACTOR
from shardsched.core.models import JobSpec
from shardsched.core.views import JobCreated
from shardsched.sdk import control_plans, history_plans, notify_plans, plans
from shardsched.store.drive import drive_async, drive_off_loop
from shardsched.store.keys import DEFAULT_NAMESPACE

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
        cls, redis_url: str, namespace: str = DEFAULT_NAMESPACE, actor: str = SDK_ACTOR
    ) -> AsyncClient:
        """``actor``: who the job versions and change logs record as making its changes."""
        from shardsched.store.redis import connect

        redis = connect(redis_url, size=4)
        try:
            deployment = await drive_async(ops.open_deployment(namespace, None), redis)
        except BaseException:
            await redis.aclose()
            raise
        return cls(redis, deployment, actor)

    async def _run(self, op: ops.Op) -> Any:
        try:
            return await drive_off_loop(op, self._redis)
        except msgspec.ValidationError as exc:
            raise plans.as_validation_error(exc) from None

    async def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        """As :meth:`Client.add_jobs`."""
        out: list[JobCreated] = []
        for chunk in plans.validated_batches(specs, batch):
            with plans.bulk_progress(out):
                out += await self._run(plans.add_validated(self, chunk).op)
        return out

    # the operations (sdk/plans.py), awaitable
    add_job = awaitable(plans.add_job)
    put_job = awaitable(plans.put_job)
    get_job = awaitable(plans.get_job)
    jobs_named = awaitable(plans.jobs_named)
    list_jobs = awaitable(plans.list_jobs)
    update_job = awaitable(plans.update_job)
    pause = awaitable(plans.pause)
    resume = awaitable(plans.resume)
    delete_job = awaitable(plans.delete_job)
    restore_job = awaitable(control_plans.restore_job)
    restore_dag = awaitable(control_plans.restore_dag)
    trigger = awaitable(plans.trigger)
    job_versions = awaitable(history_plans.job_versions)
    job_stats = awaitable(history_plans.job_stats)
    resume_job = awaitable(history_plans.resume_job)
    job_changes = awaitable(history_plans.job_changes)
    list_events = awaitable(history_plans.list_events)
    dag_changes = awaitable(history_plans.dag_changes)
    backfill = awaitable(history_plans.backfill)
    next_fire_times = awaitable(history_plans.next_fire_times)
    get_run = awaitable(plans.get_run)
    list_runs = awaitable(plans.list_runs)
    get_output = awaitable(plans.get_output)
    list_dead_letter = awaitable(plans.list_dead_letter)
    list_failures = awaitable(plans.list_failures)
    retry_run = awaitable(plans.retry_run)
    cancel_run = awaitable(control_plans.cancel_run)
    retry_runs = awaitable(control_plans.retry_runs)
    cancel_dag_run = awaitable(control_plans.cancel_dag_run)
    list_runs_under_way = awaitable(control_plans.list_runs_under_way)
    put_channel = awaitable(notify_plans.put_channel)
    list_channels = awaitable(notify_plans.list_channels)
    delete_channel = awaitable(notify_plans.delete_channel)
    add_rule = awaitable(notify_plans.add_rule)
    put_rule = awaitable(notify_plans.put_rule)
    list_rules = awaitable(notify_plans.list_rules)
    delete_rule = awaitable(notify_plans.delete_rule)
    test_channel = awaitable(notify_plans.test_channel)
    list_deliveries = awaitable(notify_plans.list_deliveries)
    get_delivery = awaitable(notify_plans.get_delivery)
    put_calendar = awaitable(notify_plans.put_calendar)
    get_calendar = awaitable(notify_plans.get_calendar)
    list_calendars = awaitable(notify_plans.list_calendars)
    delete_calendar = awaitable(notify_plans.delete_calendar)
    add_dag = awaitable(plans.add_dag)
    put_dag = awaitable(plans.put_dag)
    get_dag = awaitable(plans.get_dag)
    list_dags = awaitable(plans.list_dags)
    pause_dag = awaitable(plans.pause_dag)
    resume_dag = awaitable(plans.resume_dag)
    delete_dag = awaitable(plans.delete_dag)
    trigger_dag = awaitable(plans.trigger_dag)
    list_dag_runs = awaitable(plans.list_dag_runs)
    get_dag_run = awaitable(plans.get_dag_run)
    set_concurrency_limits = awaitable(plans.set_concurrency_limits)
    clear_concurrency_limits = awaitable(plans.clear_concurrency_limits)
    get_concurrency_key = awaitable(plans.get_concurrency_key)
    list_concurrency_keys = awaitable(plans.list_concurrency_keys)

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
