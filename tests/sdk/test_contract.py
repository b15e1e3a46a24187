"""One contract, two transports: every operation of the SDK's table through the Redis
client and through the HTTP client (token), against one real node and worker. The same
tour runs on both; each result's type, the outcome words it carries and each refusal's
exception must be the same, and the tour must call every operation of the table (a new
operation not toured fails here)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import trio

from conftest import wait_until
from shardsched import (
    Calendar,
    Client,
    ConflictError,
    CronSchedule,
    DagSpec,
    IntervalSchedule,
    JobDeleted,
    JobNotFound,
    JobPatch,
    JobSpec,
    OnceSchedule,
    OnRule,
    RetryPolicy,
    RunNotFound,
    TaskSpec,
    ValidationError,
)
from shardsched.core.apps import App
from shardsched.core.errors import DagNotFound, PreconditionFailed
from shardsched.core.notify import Channel, Rule
from shardsched.sdk.http import HttpClient
from shardsched.sdk.operations import OPERATIONS

HOURLY = IntervalSchedule(every_s=3600)


class Recorder:
    """The client, with each operation it was asked for noted."""

    def __init__(self, client: Any) -> None:
        self.client, self.called = client, set()

    def __getattr__(self, name: str) -> Any:
        self.called.add(name)
        return getattr(self.client, name)


def shape(value: Any) -> Any:
    """What both transports must agree on: the type, and a tuple's parts."""
    if isinstance(value, tuple):
        return tuple(shape(v) for v in value)
    if isinstance(value, list):
        return ["list", *sorted({type(v).__name__ for v in value})]
    return type(value).__name__


def refusal(call: Any) -> str:
    try:
        call()
    except Exception as exc:
        return type(exc).__name__
    return "no error"


def tour(c: Recorder, p: str) -> dict[str, Any]:
    """Every operation once (most of them), with the prefix ``p`` on every name."""
    seen: dict[str, Any] = {}

    def note(name: str, value: Any) -> Any:
        seen[name] = shape(value)
        return value

    created = note("add_job", c.add_job(JobSpec(name=f"{p}-a", schedule=HOURLY, command="echo hi")))
    jid = created.job_id
    note(
        "add_job unique",
        c.add_job(JobSpec(name=f"{p}-u", schedule=HOURLY, command="true"), unique_name=True),
    )
    seen["add_job unique again"] = refusal(
        lambda: c.add_job(JobSpec(name=f"{p}-u", schedule=HOURLY, command="true"), unique_name=True)
    )
    _, outcome = note(
        "put_job", c.put_job(f"{p}-put", JobSpec(name=f"{p}-put", schedule=HOURLY, command="true"))
    )
    seen["put_job outcome"] = outcome.value
    _, again = c.put_job(f"{p}-put", JobSpec(name=f"{p}-put", schedule=HOURLY, command="true"))
    seen["put_job again"] = again.value
    seen["put_job if_match"] = refusal(
        lambda: c.put_job(
            f"{p}-put", JobSpec(name=f"{p}-put", schedule=HOURLY, command="false"), if_match=9
        )
    )
    app = App(f"{p}-app")  # schedules in code: deployed as a set, the same either way
    app.job(id=f"{p}-app-job", every="1h")(lambda ctx: None)
    note("deploy_app dry run", c.deploy_app(app, dry_run=True))
    seen["deploy_app"] = c.deploy_app(app).counts()
    seen["deploy_app again"] = c.deploy_app(app).counts()
    rival = App(f"{p}-rival")
    rival.job(id=f"{p}-app-job", every="1m")(lambda ctx: None)
    seen["deploy_app not its own"] = refusal(lambda: c.deploy_app(rival))
    seen["deploy_app not an app"] = refusal(lambda: c.deploy_app("billing"))
    listener = c.add_job(JobSpec(name=f"{p}-listens", command="true", on=[OnRule(event=f"{p}.e")]))
    emitted = note("emit", c.emit(f"{p}.e", {"k": 1}, idempotency_key=f"{p}-ev"))
    seen["emit outcome"] = emitted.outcome.outcome.value
    seen["emit args"] = c.get_run(emitted.outcome.deliveries[0].run_id).args
    seen["emit again"] = c.emit(f"{p}.e", {"k": 1}, idempotency_key=f"{p}-ev").outcome.outcome
    seen["emit to"] = emitted.outcome.deliveries[0].job_id == listener.job_id
    seen["get_event"] = note("get_event", c.get_event(emitted.event_id)).outcome == emitted.outcome
    seen["get_event missing"] = refusal(lambda: c.get_event("ev_" + "0" * 20))
    seen["emit bad name"] = refusal(lambda: c.emit("no spaces"))
    note("get_job", c.get_job(jid))
    note("jobs_named", c.jobs_named(f"{p}-a"))
    note(
        "add_jobs",
        c.add_jobs(
            [JobSpec(name=f"{p}-bulk-{i}", schedule=HOURLY, command="true") for i in range(5)]
        ),
    )
    page = note("list_jobs", c.list_jobs(limit=2, name_prefix=f"{p}-bulk-"))
    seen["list_jobs next"] = bool(page.next_cursor)
    seen["each"] = sorted(
        j.name.removeprefix(p) for j in c.each(c.list_jobs, limit=2, name_prefix=f"{p}-bulk-")
    )
    note("update_job", c.update_job(jid, JobPatch(command="echo changed", labels={"team": p})))
    seen["list_jobs labels"] = [j.job_id == jid for j in c.list_jobs(labels={"team": p}).jobs]
    until = datetime.now(UTC) + timedelta(days=1)
    seen["pause"] = c.pause(jid, reason="contract", until=until).pause_reason
    seen["resume"] = c.resume(jid).status
    note("job_versions", c.job_versions(jid))
    triggered = note("trigger", c.trigger(jid, args={"k": 1}, idempotency_key=f"{p}-key"))
    seen["trigger again"] = c.trigger(jid, args={"k": 1}, idempotency_key=f"{p}-key").repeated
    seen["trigger other args"] = refusal(
        lambda: c.trigger(jid, args={"k": 2}, idempotency_key=f"{p}-key")
    )
    seen["run_id"] = triggered.run_id
    note("job_stats", c.job_stats(jid, since=datetime.now(UTC) - timedelta(hours=1)))
    note("upcoming_fires", c.upcoming_fires(jid, count=2))
    note("job_changes", c.job_changes(jid, limit=5))
    seen["by"] = c.job_changes(jid, limit=1).changes[0].by
    note("list_events", c.list_events(job_id=jid, limit=5))
    note("next_fire_times", c.next_fire_times(CronSchedule(expression="0 3 * * *"), count=2))
    start = datetime.now(UTC) - timedelta(hours=3)
    bf = c.add_job(
        JobSpec(
            name=f"{p}-bf",
            schedule=IntervalSchedule(every_s=3600, start_at=start),
            command="true",
            catchup="none",
        )
    )
    dry = note("backfill", c.backfill(bf.job_id, start, start + timedelta(hours=2), dry_run=True))
    seen["backfill ticks"] = dry.ticks
    c.pause(bf.job_id)
    note("resume_job", c.resume_job(bf.job_id, catchup="skip", dry_run=True))
    note("get_run", c.get_run(triggered.run_id))
    note("list_runs", c.list_runs(jid, limit=5))
    note("list_runs_under_way", c.list_runs_under_way(state="queued", limit=5))
    note("list_failures", c.list_failures(limit=5, name_prefix=p))
    note("list_dead_letter", c.list_dead_letter(limit=5))
    slow = c.add_job(JobSpec(name=f"{p}-slow", schedule=HOURLY, command="sleep 30"))
    cancelled = note("cancel_run", c.cancel_run(c.trigger(slow.job_id).run_id, reason="contract"))
    seen["cancel_run state"] = cancelled.state in ("cancelled", "running", "queued")
    note("retry_runs", c.retry_runs(["job_000000000000:1:1"], dry_run=True))
    seen["get_run missing"] = refusal(lambda: c.get_run("job_000000000000:1:1"))
    seen["get_job missing"] = refusal(lambda: c.get_job("job_000000000000"))
    seen["bad cron"] = refusal(
        lambda: c.add_job(
            JobSpec(name="x", schedule=CronSchedule(expression="61 * * * *"), command="true")
        )
    )
    dead = c.add_job(
        JobSpec(
            name=f"{p}-dead",
            schedule=OnceSchedule(at=datetime(2020, 1, 1, tzinfo=UTC)),
            command="exit 1",
            retry_policy=RetryPolicy(max_attempts=2, base_s=0.1, max_s=0.1, jitter=False),
        )
    )
    seen["dead_job"] = dead.job_id
    # calendars, channels, rules, limits
    note("put_calendar", c.put_calendar(f"{p}-hol", Calendar(dates=[date(2030, 1, 1)])))
    note("get_calendar", c.get_calendar(f"{p}-hol"))
    note("list_calendars", c.list_calendars())
    note("delete_calendar", c.delete_calendar(f"{p}-hol"))
    note(
        "put_channel", c.put_channel(f"{p}-ch", Channel(kind="webhook", url="http://127.0.0.1:9/"))
    )
    note("list_channels", c.list_channels())
    rule = note("add_rule", c.add_rule(Rule(events=["failed"], channels=[f"{p}-ch"], job_id=jid)))
    note("put_rule", c.put_rule(rule.id, Rule(events=["dead_letter"], channels=[f"{p}-ch"])))
    note("list_rules", c.list_rules())
    seen["delete_channel in use"] = refusal(lambda: c.delete_channel(f"{p}-ch"))
    msg = note("test_channel", c.test_channel(f"{p}-ch"))
    note("get_delivery", c.get_delivery(msg))
    note("list_deliveries", c.list_deliveries(limit=5, channel=f"{p}-ch"))
    note("delete_rule", c.delete_rule(rule.id))
    note("delete_channel", c.delete_channel(f"{p}-ch"))
    note("set_concurrency_limits", c.set_concurrency_limits(f"{p}-db", limit=2, rate=(5, 1.0)))
    note("get_concurrency_key", c.get_concurrency_key(f"{p}-db"))
    note("list_concurrency_keys", c.list_concurrency_keys())
    note("clear_concurrency_limits", c.clear_concurrency_limits(f"{p}-db"))
    # DAGs
    spec = DagSpec(
        name=f"{p}-etl",
        schedule=HOURLY,
        tasks=[
            TaskSpec(name="extract", command="sleep 20"),
            TaskSpec(name="load", command="true", depends_on=["extract"]),
        ],
    )
    dag = note("add_dag", c.add_dag(spec))
    dag_id = dag.dag_id
    note(
        "put_dag",
        c.put_dag(f"dag_{p}-etl2", DagSpec(name=f"{p}-etl2", schedule=HOURLY, tasks=spec.tasks)),
    )
    note("get_dag", c.get_dag(dag_id))
    note("list_dags", c.list_dags(name_prefix=p))
    seen["pause_dag"] = c.pause_dag(dag_id).status
    seen["resume_dag"] = c.resume_dag(dag_id).status
    opened = note("trigger_dag", c.trigger_dag(dag_id, args={"day": "x"}))
    note("list_dag_runs", c.list_dag_runs(dag_id))
    note("get_dag_run", c.get_dag_run(opened.dag_run_id))
    note("clear_task", c.clear_task(opened.dag_run_id, "extract", dry_run=True))
    note("mark_task", c.mark_task(opened.dag_run_id, "load", "succeeded", dry_run=True))
    note("cancel_dag_run", c.cancel_dag_run(opened.dag_run_id, reason="contract"))
    note("dag_changes", c.dag_changes(dag_id))
    note("delete_dag", c.delete_dag(dag_id))
    note("restore_dag", c.restore_dag(dag_id))
    seen["get_dag missing"] = refusal(lambda: c.get_dag("dag_nothing-here"))
    # a job's end
    note("delete_job", c.delete_job(jid))
    seen["trigger deleted"] = refusal(lambda: c.trigger(jid))
    note("restore_job", c.restore_job(jid))
    return seen


def finish(c: Recorder, seen: dict[str, Any]) -> dict[str, Any]:
    """What needs the worker: the output of the triggered run, a dead letter retried."""
    out = {"get_output": c.get_output(seen["run_id"]).output}
    (dead,) = [r for r in c.list_dead_letter(limit=200).runs if r.job_id == seen["dead_job"]]
    out["retry_run"] = shape(c.retry_run(dead.run_id))
    out["retry_run again"] = refusal(lambda: c.retry_run(dead.run_id))
    return out


ERRORS = {
    "add_job unique again": "NameTaken",
    "put_job if_match": PreconditionFailed.__name__,
    "trigger other args": "IdempotencyKeyReused",
    "get_run missing": RunNotFound.__name__,
    "get_job missing": JobNotFound.__name__,
    "bad cron": ValidationError.__name__,
    "delete_channel in use": ConflictError.__name__,
    "get_dag missing": DagNotFound.__name__,
    "trigger deleted": JobDeleted.__name__,
    "retry_run again": "AlreadyRetried",
    "deploy_app not its own": "NotOwned",
    "deploy_app not an app": "TypeError",
    "get_event missing": "EventNotFound",
    "emit bad name": ValidationError.__name__,
}


async def test_the_redis_and_the_http_client_keep_one_contract(
    node, worker, http, redis_server, dep
) -> None:
    token = http.headers["authorization"].removeprefix("Bearer ")
    url = str(http.base_url)
    makers = {
        "redis": lambda: Client(redis_server.url, dep.namespace),
        "http": lambda: Client(url, token=token),
    }
    results = {}
    for kind, make in makers.items():

        def run(make=make, kind=kind) -> tuple[dict, set]:
            with make() as client:
                recorder = Recorder(client)
                return tour(recorder, kind), recorder.called

        results[kind] = await trio.to_thread.run_sync(run)
    assert isinstance(makers["http"](), HttpClient)
    for kind, make in makers.items():
        seen, called = results[kind]

        async def ended(make=make, seen=seen) -> bool:
            def check() -> bool:
                with make() as client:
                    done = client.get_run(seen["run_id"]).state == "succeeded"
                    dead = [
                        r
                        for r in client.list_dead_letter(limit=200).runs
                        if r.job_id == seen["dead_job"]
                    ]
                    return done and bool(dead)

            return await trio.to_thread.run_sync(check)

        await wait_until(ended, timeout=30)

        def run_finish(make=make, seen=seen, called=called) -> dict:
            with make() as client:
                recorder = Recorder(client)
                out = finish(recorder, seen)
                called |= recorder.called
                return out

        seen.update(await trio.to_thread.run_sync(run_finish))

    redis_seen, redis_called = results["redis"]
    http_seen, http_called = results["http"]
    untoured = set(OPERATIONS) - redis_called
    assert untoured == set(), "operations the contract does not tour"
    assert http_called == redis_called
    for name, error in ERRORS.items():
        assert redis_seen[name] == error, (name, redis_seen[name])
    differ = {
        k: (redis_seen[k], http_seen.get(k))
        for k in redis_seen
        if k not in ("run_id", "dead_job", "by") and redis_seen[k] != http_seen.get(k)
    }
    assert differ == {}, "the two transports disagree"
    assert redis_seen["put_job outcome"] == "created" and redis_seen["put_job again"] == "unchanged"
    assert redis_seen["trigger again"] is True and redis_seen["backfill ticks"] == 3
    assert redis_seen["get_output"] == "changed\n"
    # who made the change: the Redis SDK's actor, and the HTTP token's name
    assert redis_seen["by"] == "sdk" and http_seen["by"] == "test-admin"


async def test_ids_no_url_can_carry_are_refused_as_the_redis_client_refuses_them(
    node, http, redis_server, dep
) -> None:
    """An id that is empty, ``.``, ``..``, holds a ``/`` or is longer than any id cannot be
    one segment of a URL (a router would resolve or split it and answer another route):
    the HTTP client answers as the Redis client does, sending nothing."""
    token = http.headers["authorization"].removeprefix("Bearer ")
    spec = JobSpec(name="odd", schedule=HOURLY, command="true")

    def outcomes(client: Any) -> list[str]:
        out = []
        for odd in ("", ".", "..", "a/b", "x/changes", "x" * 5000):
            out += [
                refusal(lambda odd=odd: client.get_job(odd)),
                refusal(lambda odd=odd: client.job_changes(odd)),
                refusal(lambda odd=odd: client.put_job(odd, spec)),
                refusal(lambda odd=odd: client.get_run(odd)),
                refusal(lambda odd=odd: client.get_dag(odd)),
                refusal(lambda odd=odd: client.get_dag_run(odd)),
            ]
        out.append(refusal(lambda: client.put_calendar("cal/", Calendar())))
        out.append(refusal(lambda: client.set_concurrency_limits("db/main", limit=2)))
        out.append(refusal(lambda: client.list_jobs(limit=0)))
        out.append(refusal(lambda: client.list_jobs(limit=100_000)))
        naive = datetime(2026, 1, 1)  # no zone: refused alike, never a TypeError
        out.append(refusal(lambda: client.job_stats("odd-naive", since=naive)))
        out.append(refusal(lambda: client.list_events(since=naive)))
        out.append(refusal(lambda: client.list_runs("odd-naive", since=naive)))
        out.append(refusal(lambda: client.pause("odd-naive", until=naive)))
        return out

    def both() -> tuple[list[str], list[str]]:
        with (
            Client(redis_server.url, dep.namespace) as r,
            Client(str(http.base_url), token=token) as h,
        ):
            return outcomes(r), outcomes(h)

    by_redis, by_http = await trio.to_thread.run_sync(both)
    assert by_http == by_redis
    assert by_redis[:6] == [
        "JobNotFound",
        "JobNotFound",
        "ValidationError",
        "RunNotFound",
        "DagNotFound",
        "DagRunNotFound",
    ]
    assert by_redis[-8:] == ["ValidationError"] * 8
