"""Deploying an app (ops/apps/deploy.py) against a real Redis: its own set only, pause
state and history kept, and two deploys racing ending in the newer one's definitions.

The race is checked by a model that shares nothing with the fencing: whatever the order
in which two deploys' rounds reach Redis (a seeded random interleaving, round by round),
the app's live jobs and DAGs must afterwards be exactly the later claimer's declarations,
and the earlier one either finished or stopped with Superseded."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from shardsched import JobSpec
from shardsched.core.app_sets import APPLY_SET
from shardsched.core.apps import App
from shardsched.core.errors import NotOwned, Superseded
from shardsched.core.models import IntervalSchedule, JobStatus
from shardsched.core.sameness import same_definition
from shardsched.ops.apps.deploy import deploy_app
from shardsched.sdk.redis_calls import refused
from shardsched.sdk.sync import Client


@pytest.fixture
def client(redis_server) -> Iterator[Client]:
    c = Client(redis_server.url, namespace=f"deploy-{uuid.uuid4().hex[:8]}")
    yield c
    c.close()


def _noop(ctx: Any) -> None:
    return None


def app_of(name: str, jobs: dict[str, str], dag_tasks: list[str] | None = None) -> App:
    """An app of interval jobs {id: every} and, optionally, a DAG ``etl`` of a chain."""
    app = App(name)
    for job_id, every in jobs.items():
        app.job(id=job_id, every=every)(_noop)
    if dag_tasks:
        etl = app.dag("etl", every="1d")
        before: list[str] = []
        for task in dag_tasks:
            etl.task(name=task, depends_on=before[-1:])(_noop)
            before.append(task)
    return app


def deploy(c: Client, app: App, dry_run: bool = False) -> Any:
    return c.deploy_app(app, dry_run=dry_run)


def live(c: Client, app: str) -> dict[str, Any]:
    """The app's live jobs and DAGs: {id: spec}, read through the SDK's own lists."""
    labels = {APPLY_SET: f"app:{app}"}
    out: dict[str, Any] = {}
    for job in c.each(c.list_jobs, labels=labels, limit=100):
        if job.dag_id is None:
            out[job.job_id] = c.get_job(job.job_id)
    for dag in c.each(c.list_dags, labels=labels, limit=100):
        out[dag.dag_id] = dag
    return out


def test_created_changed_unchanged_pruned_within_its_own_set(client: Client) -> None:
    c = client
    other = c.add_job(JobSpec(name="by-hand", command="true", schedule=IntervalSchedule(60)))
    v1 = app_of("billing", {"a": "1h", "b": "2h", "c": "3h"}, ["extract", "load"])
    dry = deploy(c, v1, dry_run=True)
    assert dry.dry_run and dry.generation is None
    assert [(x.id, x.action) for x in dry.changes] == [
        ("a", "created"), ("b", "created"), ("c", "created"), ("dag_etl", "created")
    ]  # fmt: skip
    assert live(c, "billing") == {}, "a dry run writes nothing"
    first = deploy(c, v1)
    assert first.counts() == {"created": 4} and first.generation == 1
    assert set(live(c, "billing")) == {"a", "b", "c", "dag_etl"}
    c.pause("b", reason="kept over a redeploy")
    runs_before = c.trigger("b").run_id
    v2 = app_of("billing", {"a": "1h", "b": "20m"}, ["extract", "transform", "load"])
    plan = {x.id: x for x in deploy(c, v2, dry_run=True).changes}
    assert {k: x.action for k, x in plan.items()} == {
        "a": "unchanged", "b": "changed", "dag_etl": "changed", "c": "pruned"
    }  # fmt: skip
    assert plan["b"].before["schedule"]["every_s"] == 7200
    assert plan["b"].after["schedule"]["every_s"] == 1200
    second = deploy(c, v2)
    assert second.counts() == {"unchanged": 1, "changed": 2, "pruned": 1}
    b = c.get_job("b")
    assert b.status == JobStatus.PAUSED and b.pause_reason == "kept over a redeploy"
    assert b.version == 3, "created, paused, changed: each a version"
    assert c.get_run(runs_before).job_id == "b", "its history stays"
    assert c.get_job("c").status == JobStatus.DELETED, "pruned: deleted, history kept"
    assert [t.name for t in c.get_dag("dag_etl").tasks] == ["extract", "transform", "load"]
    assert c.get_job(other.job_id).status == JobStatus.ACTIVE, "another's job untouched"
    assert deploy(c, v2).counts() == {"unchanged": 3}
    # the pruned id declared again: its next incarnation, history and all
    v3 = app_of("billing", {"a": "1h", "b": "20m", "c": "3h"}, ["extract", "transform", "load"])
    assert {x.id: x.action for x in deploy(c, v3).changes}["c"] == "created"
    assert c.get_job("c").status == JobStatus.ACTIVE


def test_an_id_outside_the_set_is_refused_and_nothing_is_written(client: Client) -> None:
    c = client
    c.put_job("taken", JobSpec(name="taken", command="true", schedule=IntervalSchedule(60)))
    deploy(c, app_of("other", {"theirs": "1h"}))
    for declared in ({"mine": "1h", "taken": "1h"}, {"mine": "1h", "theirs": "1h"}):
        with pytest.raises(NotOwned) as refused_one:
            deploy(c, app_of("billing", declared))
        assert refused_one.value.id in ("taken", "theirs")
        assert live(c, "billing") == {}, "nothing of the deploy was written"
    assert c.get_job("taken").version == 1 and c.get_job("theirs").version == 1


def _step(c: Client, op: Any, replies: list[Any] | None) -> tuple[list[Any] | None, Any]:
    """One round of ``op``: (the calls it sends next, or None when done; its result)."""
    try:
        calls = next(op) if replies is None else op.send(replies)
    except StopIteration as stop:
        return None, stop.value
    return calls, None


@pytest.mark.parametrize("seed", range(80))
def test_two_deploys_racing_end_in_the_later_claims_definitions(client: Client, seed: int) -> None:
    c = client
    rng = random.Random(seed)
    deploy(c, app_of("race", {"j1": "5m", "j3": "1h", "j5": "1h"}, ["a", "b"]))
    older = app_of("race", {"j1": "10m", "j2": "2h", "j3": "1h", "j6": "6h"}, ["a"])
    newer = app_of("race", {"j1": "15m", "j2": "2h", "j4": "4h"}, ["a", "b", "c"])
    ops = {
        name: deploy_app(c.deployment, "race", dict(app.jobs()), dict(app.dags()), False, name)
        for name, app in (("older", older), ("newer", newer))
    }
    # the older claims its generation first: run it alone up to and past its claim
    pending: dict[str, list[Any] | None] = {}
    claimed: list[str] = []
    outcome: dict[str, str] = {}
    for name in ("older", "newer"):
        calls, _ = _step(c, ops[name], None)
        while calls is not None and not any(call.args[0] == "INCR" for call in calls):
            calls, _ = _step(c, ops[name], refused(calls, c._execute(calls)))
        assert calls is not None
        pending[name] = calls  # its INCR, not yet sent
    for name in ("older", "newer"):  # claims in this order: the newer claims later
        calls = pending[name]
        assert calls is not None
        pending[name], _ = _step(c, ops[name], refused(calls, c._execute(calls)))
        claimed.append(name)
    lean = rng.random()  # how often the older goes next: long runs of one side too
    while pending:
        name = "older" if "older" in pending and rng.random() < lean else "newer"
        name = name if name in pending else next(iter(pending))
        calls = pending[name]
        assert calls is not None
        try:
            nxt, _ = _step(c, ops[name], refused(calls, c._execute(calls)))
        except Superseded:
            outcome[name] = "superseded"
            del pending[name]
            continue
        if nxt is None:
            outcome[name] = "finished"
            del pending[name]
        else:
            pending[name] = nxt
    assert outcome["newer"] == "finished"
    assert outcome["older"] in ("finished", "superseded")
    now = live(c, "race")
    declared = dict(newer.jobs()) | dict(newer.dags())
    assert sorted(now) == sorted(declared), (seed, outcome)
    for any_id, spec in declared.items():
        there = now[any_id]
        if any_id.startswith("dag_"):
            assert [t.name for t in there.tasks] == [t.name for t in spec.tasks], seed
        else:
            assert same_definition(spec, _spec(there)), (seed, any_id)


def _spec(job: Any) -> JobSpec:
    from shardsched.ops.jobs.change import spec_of

    return spec_of(job)


def test_a_declaration_refused_anywhere_is_refused_before_anything_is_written(
    client: Client,
) -> None:
    """Found by the independent tester: a DAG the service refuses only at its put (a
    cycle, an unknown dependency, a bad schedule) once let the jobs before it be written."""
    from shardsched import DagSpec, ValidationError

    c = client
    deploy(c, app_of("partial", {"first": "1h"}))
    good = app_of("partial", {"first": "2h", "zzz": "1h"})
    bad_dags = [
        {"name": "d", "schedule": {"type": "interval", "every_s": 60},
         "tasks": [{"name": "a", "command": "x", "depends_on": ["nope"]}]},
        {"name": "d", "schedule": {"type": "interval", "every_s": 60},
         "tasks": [{"name": "a", "command": "x", "depends_on": ["b"]},
                   {"name": "b", "command": "x", "depends_on": ["a"]}]},
        {"name": "d", "schedule": {"type": "cron", "expression": "0 25 * * *"},
         "tasks": [{"name": "a", "command": "x"}]},
    ]  # fmt: skip
    import msgspec

    for body in bad_dags:
        dag = msgspec.convert(body, DagSpec)
        for dry_run in (True, False):
            op = deploy_app(c.deployment, "partial", dict(good.jobs()), {"d": dag}, dry_run, "t")
            with pytest.raises(ValidationError) as err:
                c._run(op)
            assert err.value.field.startswith("$.dags.d"), err.value.field
    assert c.get_job("first").schedule.every_s == 3600, "nothing was written"
    assert set(live(c, "partial")) == {"first"}


def test_an_apps_label_is_given_and_taken_only_by_its_deploys(client: Client) -> None:
    """Found by the independent tester: a job made by hand with the label apply-set:
    app:own was pruned by own's next deploy, and a hand PUT took an app's job over."""
    from shardsched import DagSpec, JobPatch, TaskSpec, ValidationError

    c = client
    deploy(c, app_of("own", {"kept": "1h"}, ["a"]))
    mine = {"apply-set": "app:own"}
    every = IntervalSchedule(60)
    refused_writes = {
        "create": lambda: c.add_job(JobSpec(name="s", command="x", schedule=every, labels=mine)),
        "put new": lambda: c.put_job("sneaky", JobSpec(name="s", command="x", schedule=every,
                                                       labels=mine)),
        "put away": lambda: c.put_job("kept", JobSpec(name="kept", command="x", schedule=every)),
        "patch away": lambda: c.update_job("kept", JobPatch(labels={})),
        "dag": lambda: c.add_dag(DagSpec(name="d", schedule=every, labels=mine,
                                         tasks=[TaskSpec(name="a", command="x")])),
        "dag away": lambda: c.put_dag("dag_etl", DagSpec(name="etl", schedule=every,
                                                         tasks=[TaskSpec(name="a", command="x")])),
    }  # fmt: skip
    for what, write in refused_writes.items():
        with pytest.raises(ValidationError) as err:
            write()
        assert err.value.field == "$.labels", what
    # found by the second tester: a definition changed by hand, the label kept
    from shardsched import ConflictError

    hotfix = JobSpec(name="kept", command="y", schedule=every, labels=mine)
    dag_fix = DagSpec(name="etl", schedule=every, labels=mine,
                      tasks=[TaskSpec(name="a", command="y")])  # fmt: skip
    for what, write in {
        "put": lambda: c.put_job("kept", hotfix),
        "patch": lambda: c.update_job("kept", JobPatch(command="z")),
        "dag": lambda: c.put_dag("dag_etl", dag_fix),
    }.items():
        with pytest.raises(ConflictError, match="belongs to app 'own'"):
            write()
        assert c.get_job("kept").command == "handler:own._noop", what
    same = c.get_job("kept")
    assert c.put_job("kept", _spec(same))[1].value == "unchanged", "the same: no change"
    assert c.pause("kept").status == JobStatus.PAUSED, "pausing an app's job stays open"
    assert c.resume("kept").status == JobStatus.ACTIVE
    assert set(live(c, "own")) == {"kept", "dag_etl"}
    assert {x.id: x.action for x in deploy(c, app_of("own", {"kept": "1h"}, ["a"])).changes} == {
        "kept": "unchanged", "dag_etl": "unchanged"
    }  # fmt: skip


def test_a_lost_generation_counter_does_not_refuse_every_deploy_after(client: Client) -> None:
    """The shards' fences outlive the app's counter (a Redis restarted without it): the
    next deploy moves the counter past them instead of being superseded forever; a fence
    lost under a running deploy stops it with a ConflictError, writing nothing more."""
    from shardsched.core.errors import ConflictError

    c = client
    deploy(c, app_of("lost", {"a": "1h"}))
    deploy(c, app_of("lost", {"a": "2h"}))
    redis = c._node_clients()[0]
    redis.delete(c.deployment.globals.app_generation("lost"))
    third = deploy(c, app_of("lost", {"a": "3h"}))
    assert third.generation == 3 and third.counts() == {"changed": 1}
    fourth = app_of("lost", {"a": "4h"})
    op = deploy_app(c.deployment, "lost", dict(fourth.jobs()), {})
    calls, _ = _step(c, op, None)
    while calls is not None and not any(str(x.script).startswith("fenced:") for x in calls):
        calls, _ = _step(c, op, refused(calls, c._execute(calls)))
    for s in range(c.deployment.n_shards):
        redis.delete(c.deployment.shard(s).app_fence("lost"))
    with pytest.raises(ConflictError, match="lost its fence"):
        while calls is not None:
            calls, _ = _step(c, op, refused(calls, c._execute(calls)))
    assert c.get_job("a").schedule.every_s == 3 * 3600
