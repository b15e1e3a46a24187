"""``shardsched.Client``: the synchronous SDK on redis-py + hiredis, one server or a Redis
Cluster; every operation of :mod:`.plans` as a blocking method."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import msgspec
import redis as redis_py

from shardsched import ops
from shardsched.core.access import SDK_ACTOR
from shardsched.core.errors import RedisUnavailable, Unreachable
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
from shardsched.sdk.redis_calls import (
    command,
    load_functions_on,
    packed,
    refused,
    sentinel_client,
    tls_kwargs,
)
from shardsched.sdk.server_clock import ServerClock
from shardsched.store.keys import DEFAULT_NAMESPACE
from shardsched.store.redis.durable import writes
from shardsched.store.scripts import not_found

#: URLs the HTTP client takes (the rest are Redis URLs).
HTTP_SCHEMES = ("http://", "https://")
P = ParamSpec("P")
T = TypeVar("T")


def blocking(
    plan: Callable[Concatenate[plans.Handle, P], plans.Plan[T]],
) -> Callable[Concatenate[Client, P], T]:
    """The plan as a method of :class:`Client` that runs it and returns its result."""

    @functools.wraps(plan)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = self._run(plan(self, *args, **kwargs).op)
        return result

    return method


class Client:
    """A synchronous handle on one shardsched deployment (redis-py + hiredis).

    ``redis_url`` is ``redis://…`` (``rediss://`` for TLS) for one server,
    ``redis+cluster://host:port[,…]`` (``rediss+cluster://``) for a Redis Cluster
    (redis-py's RedisCluster finds the nodes and owns the slot map; each batch goes to
    every node its slots live on, one pipeline per node), or
    ``redis+sentinel://host:port[,…]/service`` for the primary the sentinels name
    (redis-py's Sentinel finds it again after a failover).

    ``http://…`` or ``https://…`` (or no URL: the one the environment or the CLI's config
    profile names) makes an :class:`~shardsched.sdk.http.HttpClient` instead: the same
    operations through the HTTP API, with a token (``token=``, ``token_file=``,
    ``profile=``, ``ca_file=``, ``retries=``, ``timeout_s=``)."""

    def __new__(cls, redis_url: str | None = None, *args: Any, **kwargs: Any) -> Client:
        if cls is Client and (redis_url is None or redis_url.startswith(HTTP_SCHEMES)):
            from shardsched.sdk.http import HttpClient

            return HttpClient(redis_url, *args, **kwargs)  # type: ignore[return-value]
        if cls is Client and set(kwargs) - {"namespace", "actor"}:
            given = ", ".join(sorted(set(kwargs) - {"namespace", "actor"}))
            raise TypeError(
                f"{given}: for the HTTP API (an http:// or https:// URL); a Redis URL takes"
                " namespace= and actor="
            )
        return super().__new__(cls)

    def __init__(
        self, redis_url: str, namespace: str = DEFAULT_NAMESPACE, actor: str = SDK_ACTOR
    ) -> None:
        """``actor``: who the job versions and change logs record as making its changes."""
        self.actor = actor
        self._cluster: redis_py.RedisCluster | None = None
        if redis_url.startswith(("redis+cluster://", "rediss+cluster://")):
            from shardsched.store.redis.cluster import parse_cluster_url

            seeds = parse_cluster_url(redis_url)
            tls = seeds[0].tls
            ssl: dict[str, Any] = {}
            if tls is not None:  # the same options the trio client reads (store/redis/tls)
                ssl = {
                    "ssl": True,
                    "ssl_ca_certs": tls.ca_file,
                    "ssl_certfile": tls.cert_file,
                    "ssl_keyfile": tls.key_file,
                }
            self._cluster = redis_py.RedisCluster(
                startup_nodes=[redis_py.cluster.ClusterNode(u.host, u.port) for u in seeds],
                username=seeds[0].username,
                password=seeds[0].password,
                protocol=2,
                **ssl,
            )
            self._redis = None
        elif redis_url.startswith(("redis+sentinel://", "rediss+sentinel://")):
            self._redis = sentinel_client(redis_url)
        else:
            self._redis = redis_py.Redis.from_url(redis_url, protocol=2, **tls_kwargs(redis_url))
            # Raw RESP replies, as the trio client sees them: the operations are shared.
            self._redis.response_callbacks.clear()
        try:
            self._load_scripts()
        except (redis_py.exceptions.ConnectionError, redis_py.exceptions.TimeoutError) as exc:
            self.close()
            raise Unreachable(f"cannot reach Redis: {exc}") from exc
        self.deployment = self._run(ops.open_deployment(namespace, None))

    def _node_clients(self) -> list[redis_py.Redis]:
        """The one server, or every cluster master, as raw-reply clients."""
        if self._cluster is None:
            assert self._redis is not None
            return [self._redis]
        clients = []
        for node in self._cluster.get_primaries():
            client = node.redis_connection
            client.response_callbacks.clear()
            clients.append(client)
        return clients

    def _load_scripts(self) -> None:
        """Load every script (its function) up front; a user that may run none (the
        ``reader`` ACL role) loads none, and a call that needs one is refused with NOPERM
        when it is made."""
        for client in self._node_clients():
            load_functions_on(client)

    def _client_for(self, call: ops.Call) -> redis_py.Redis:
        if self._cluster is None:
            assert self._redis is not None
            return self._redis
        from shardsched.store.redis.cluster import command_slot

        slot = command_slot(command(call))
        if slot is None:
            node = self._cluster.get_random_primary_node()
        else:
            node = self._cluster.nodes_manager.get_node_from_slot(slot)
        client = node.redis_connection
        if client is None:
            self._cluster.nodes_manager.initialize()
            return self._client_for(call)
        client.response_callbacks.clear()
        return client

    def _execute(self, calls: Sequence[ops.Call], attempt: int = 0) -> list[Any]:
        groups: dict[int, tuple[redis_py.Redis, list[int]]] = {}
        for i, call in enumerate(calls):
            client = self._client_for(call)
            groups.setdefault(id(client), (client, []))[1].append(i)
        replies: list[Any] = [None] * len(calls)
        dep: ops.Deployment | None = getattr(self, "deployment", None)  # None: being read
        durable = None if dep is None else dep.durable
        for client, idx in groups.values():
            pipe = client.pipeline(transaction=False)
            commands = [command(calls[i]) for i in idx]
            for c in commands:
                pipe.execute_command(*c)
            wait = dep is not None and durable is not None and writes(commands)
            if wait:  # as the trio client does (store/redis/durable.py)
                assert dep is not None and durable is not None
                pipe.execute_command("PUBLISH", dep.globals.durable_channel, "")
                pipe.execute_command("WAIT", durable.replicas, durable.timeout_ms)
            out = pipe.execute(raise_on_error=False)
            if wait:
                assert durable is not None
                acked = out.pop()
                out.pop()
                if isinstance(acked, int) and acked < durable.replicas:
                    raise Unreachable(
                        f"{acked} of {durable.replicas} replicas acknowledged within"
                        f" {durable.timeout_ms} ms (the durable mode): the call ran, but a"
                        " failover may lose it"
                    )
            for i, reply in zip(idx, out, strict=True):
                replies[i] = reply
        missing = not_found(replies)
        redo = [
            i
            for i, r in enumerate(replies)
            if i in missing
            or (
                isinstance(r, redis_py.exceptions.ResponseError)
                and str(r).startswith(("MOVED", "ASK"))
            )
        ]
        if redo and attempt < 5:
            # a restarted or new node without our scripts, or slots that moved: look again
            if self._cluster is not None:
                self._cluster.nodes_manager.initialize()
            self._load_scripts()
            for i, reply in zip(
                redo, self._execute([calls[i] for i in redo], attempt + 1), strict=True
            ):
                replies[i] = reply
        return replies

    def _run(self, op: ops.Op, replies: list[Any] | None = None) -> Any:
        """Run ``op`` to its end; ``replies``: those of the round it is waiting on."""
        try:
            calls = next(op) if replies is None else op.send(replies)
            while True:
                calls = op.send(refused(calls, self._execute(calls)))
        except StopIteration as stop:
            return stop.value
        except msgspec.ValidationError as exc:
            raise plans.as_validation_error(exc) from None
        except redis_py.exceptions.BusyLoadingError as exc:  # redis-py raises this one
            raise RedisUnavailable(f"LOADING {exc}") from None
        except (redis_py.exceptions.ConnectionError, redis_py.exceptions.TimeoutError) as exc:
            raise Unreachable(f"cannot reach Redis: {exc}") from exc

    def add_jobs(self, specs: Iterable[JobSpec], batch: int = 1000) -> list[JobCreated]:
        """Register many jobs, one pipelined round trip per ``batch``.

        Every spec is validated before anything is written (a bad one raises
        ValidationError naming ``$[i].field``, and nothing is registered). Raises
        BulkPartiallyApplied, listing the jobs that were registered, if Redis fails after
        the first batch."""
        out: list[JobCreated] = []
        chunks = plans.validated_batches(specs, batch)
        with plans.bulk_progress(out):
            if self._redis is None or any(s.depends_on for chunk in chunks for s in chunk):
                # a cluster's batches go node by node; a DAG task's join reads its DAG
                for chunk in chunks:
                    out += self._run(jobs.add_validated(self, chunk).op)
            else:
                self._overlapped([jobs.add_validated(self, chunk).op for chunk in chunks], out)
        return out

    each = staticmethod(pages.each)

    def _overlapped(self, batches: list[ops.Op], out: list[JobCreated]) -> None:
        """Run the batches with two in flight, so Redis runs one while the next is planned.

        Each batch's first round (the server's time) is answered at once, from
        :class:`ServerClock` after the first; its registration round is written to a
        connection of its own without waiting, and read back after the next batch is
        written. Whatever was written is read back even after a failure, so ``out`` lists
        every job registered (a failure then raises, and add_jobs names them in
        BulkPartiallyApplied)."""
        assert self._redis is not None
        pool = self._redis.connection_pool
        conn = pool.get_connection()
        sent: deque[tuple[ops.Op, Sequence[ops.Call]]] = deque()
        error: BaseException | None = None
        clock = ServerClock()  # a TIME would wait behind the batch Redis is running
        try:
            for op in batches:
                try:
                    calls = op.send(clock.answer(next(op), self._execute))
                except StopIteration as stop:  # nothing to write
                    out += stop.value
                    continue
                conn.send_packed_command([packed(calls)])
                sent.append((op, calls))
                if len(sent) > 1:
                    out += self._read_back(conn, *sent.popleft())
        except BaseException as exc:
            error = exc
        try:
            while sent:
                try:
                    out += self._read_back(conn, *sent.popleft())
                except BaseException as exc:
                    error = error or exc
            durable = self.deployment.durable
            if durable is not None and error is None:  # the whole bulk on the replicas
                conn.send_command("PUBLISH", self.deployment.globals.durable_channel, "")
                conn.send_command("WAIT", durable.replicas, durable.timeout_ms)
                conn.read_response()
                acked = conn.read_response()
                if not isinstance(acked, int) or acked < durable.replicas:
                    error = Unreachable(
                        f"{acked} of {durable.replicas} replicas acknowledged the bulk within"
                        f" {durable.timeout_ms} ms (the durable mode): a failover may lose it"
                    )
        finally:
            if error is not None:
                conn.disconnect()  # a reply may still be unread
            pool.release(conn)
        if error is not None:
            raise error

    def _read_back(self, conn: Any, op: ops.Op, calls: Sequence[ops.Call]) -> Any:
        """The replies to ``calls``, written earlier on ``conn``; then ``op`` to its end."""
        replies: list[Any] = []
        for _ in calls:
            try:
                replies.append(conn.read_response())
            except redis_py.exceptions.ResponseError as exc:  # an error reply, kept as one
                replies.append(exc)
        redo = not_found(replies)
        if redo:  # a server without our functions (a new one, a flush): nothing ran
            self._load_scripts()
            for i, reply in zip(redo, self._execute([calls[i] for i in redo]), strict=True):
                replies[i] = reply
        return self._run(op, refused(calls, replies))

    # the operations (sdk/operations.py's table; the plans in sdk/plans/), blocking
    add_job = blocking(jobs.add_job)
    put_job = blocking(jobs.put_job)
    get_job = blocking(jobs.get_job)
    jobs_named = blocking(jobs.jobs_named)
    list_jobs = blocking(jobs.list_jobs)
    update_job = blocking(jobs.update_job)
    pause = blocking(jobs.pause)
    resume = blocking(jobs.resume)
    delete_job = blocking(jobs.delete_job)
    restore_job = blocking(jobs.restore_job)
    restore_dag = blocking(dags.restore_dag)
    trigger = blocking(jobs.trigger)
    job_versions = blocking(jobs.job_versions)
    job_stats = blocking(ticks.job_stats)
    upcoming_fires = blocking(ticks.upcoming_fires)
    resume_job = blocking(ticks.resume_job)
    job_changes = blocking(jobs.job_changes)
    list_events = blocking(runs.list_events)
    dag_changes = blocking(dags.dag_changes)
    backfill = blocking(ticks.backfill)
    next_fire_times = blocking(schedules.next_fire_times)
    get_run = blocking(runs.get_run)
    list_runs = blocking(runs.list_runs)
    get_output = blocking(runs.get_output)
    list_dead_letter = blocking(runs.list_dead_letter)
    list_failures = blocking(runs.list_failures)
    retry_run = blocking(runs.retry_run)
    cancel_run = blocking(runs.cancel_run)
    retry_runs = blocking(runs.retry_runs)
    cancel_dag_run = blocking(dags.cancel_dag_run)
    clear_task = blocking(dags.clear_task)
    mark_task = blocking(dags.mark_task)
    list_runs_under_way = blocking(runs.list_runs_under_way)
    put_channel = blocking(notify.put_channel)
    list_channels = blocking(notify.list_channels)
    delete_channel = blocking(notify.delete_channel)
    add_rule = blocking(notify.add_rule)
    put_rule = blocking(notify.put_rule)
    list_rules = blocking(notify.list_rules)
    delete_rule = blocking(notify.delete_rule)
    test_channel = blocking(notify.test_channel)
    list_deliveries = blocking(notify.list_deliveries)
    get_delivery = blocking(notify.get_delivery)
    put_calendar = blocking(schedules.put_calendar)
    get_calendar = blocking(schedules.get_calendar)
    list_calendars = blocking(schedules.list_calendars)
    delete_calendar = blocking(schedules.delete_calendar)
    add_dag = blocking(dags.add_dag)
    put_dag = blocking(dags.put_dag)
    get_dag = blocking(dags.get_dag)
    list_dags = blocking(dags.list_dags)
    pause_dag = blocking(dags.pause_dag)
    resume_dag = blocking(dags.resume_dag)
    delete_dag = blocking(dags.delete_dag)
    trigger_dag = blocking(dags.trigger_dag)
    list_dag_runs = blocking(dags.list_dag_runs)
    get_dag_run = blocking(dags.get_dag_run)
    set_concurrency_limits = blocking(concurrency.set_concurrency_limits)
    clear_concurrency_limits = blocking(concurrency.clear_concurrency_limits)
    get_concurrency_key = blocking(concurrency.get_concurrency_key)
    list_concurrency_keys = blocking(concurrency.list_concurrency_keys)
    deploy_app = blocking(apps.deploy_app)
    emit = blocking(events.emit)
    get_event = blocking(events.get_event)

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
        elif self._redis is not None:
            self._redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
