"""``shardsched.App``'s declarations (core/apps.py): what a decorator builds, checked
against specs written out by hand as the API takes them, and every mistake a ValidationError
at declaration naming the function and the field; ``load_app`` finding the app."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from shardsched import App, DagSpec, JobSpec, ValidationError
from shardsched.core.apps import app_handler, load_app
from shardsched.core.sameness import same_definition
from shardsched.worker.handlers import lookup


def handle(ctx): ...


def test_a_job_is_the_spec_the_api_would_take() -> None:
    app = App("billing")

    @app.job(cron="0 2 * * *", tz="Europe/Berlin", retries=3, queue="db", timeout_s=60)
    def nightly_invoices(ctx):
        return "ran"

    ((job_id, spec),) = app.jobs()
    by_hand = msgspec.json.decode(
        b"""{"name": "nightly_invoices", "command": "handler:billing.nightly_invoices",
        "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Berlin"},
        "retry_policy": {"max_attempts": 4}, "queue": "db", "timeout_s": 60,
        "labels": {"apply-set": "app:billing"}}""",
        type=JobSpec,
    )
    assert job_id == "nightly_invoices" and same_definition(spec, by_hand)
    assert nightly_invoices(None) == "ran", "the function is returned as it was"
    assert app_handler("billing.nightly_invoices") is nightly_invoices
    assert lookup("handler:billing.nightly_invoices") is nightly_invoices


def test_every_and_at_and_a_dag() -> None:
    app = App("etl")
    app.job(id="quarter", every="15m")(handle)
    app.job(id="once", at="2027-01-01T00:00:00+00:00")(handle)

    @app.dag(cron="30 3 * * *")
    def ledger(): ...

    @ledger.task()
    def extract(ctx): ...

    @ledger.task(depends_on=[extract], retries=2)
    def load(ctx): ...

    jobs = dict(app.jobs())
    assert jobs["quarter"].schedule.every_s == 900
    assert jobs["once"].schedule.at.year == 2027
    ((dag_id, dag),) = app.dags()
    by_hand = msgspec.json.decode(
        b"""{"name": "ledger", "schedule": {"type": "cron", "expression": "30 3 * * *"},
        "labels": {"apply-set": "app:etl"}, "tasks": [
          {"name": "extract", "command": "handler:etl.ledger.extract"},
          {"name": "load", "command": "handler:etl.ledger.load", "depends_on": ["extract"],
           "retry_policy": {"max_attempts": 3}}]}""",
        type=DagSpec,
    )
    assert dag_id == "dag_ledger" and same_definition(dag, by_hand)
    assert lookup("handler:etl.ledger.load") is load


@pytest.mark.parametrize(
    ("declare", "said", "field"),
    [
        (lambda a: a.job()(handle), "exactly one of cron=, every=, at= or schedule=", "$.schedule"),
        (lambda a: a.job(cron="* * * * *", every=60)(handle), "not cron, every", "$.schedule"),
        (lambda a: a.job(every=60, tz="UTC")(handle), "tz= goes with cron=", "$.tz"),
        (lambda a: a.job(cron="61 * * * *")(handle), "minute field", "$.schedule.expression"),
        (lambda a: a.job(every="soon")(handle), "not a duration", "$.schedule.every_s"),
        (
            lambda a: a.job(every=60, retries=True)(handle),
            "retries= is a whole number",
            "$.retries",
        ),
        (lambda a: a.job(every=60, id="a.b")(handle), "give id=", "$.id"),
        (lambda a: a.job(every=60, color="red")(handle), "color", None),
        (
            lambda a: a.job(every=60, labels={"apply-set": "x"})(handle),
            "the app's own",
            "$.labels",
        ),
    ],
)
def test_a_mistake_is_said_at_declaration(declare, said, field) -> None:
    app = App("mistakes")
    with pytest.raises(ValidationError) as err:
        declare(app)
    assert said in str(err.value) and "mistakes: job" in str(err.value)
    if field is not None:
        assert err.value.field == field
    assert app.jobs() == []


def test_twice_and_unknown_dependencies_and_bad_names() -> None:
    app = App("twice")
    app.job(every=60)(handle)
    with pytest.raises(ValidationError, match="declared twice"):
        app.job(every=30)(handle)
    etl = app.dag("etl", every=3600)
    with pytest.raises(ValidationError, match="not a task of this DAG"):
        etl.task(depends_on=[handle])(handle)
    with pytest.raises(ValidationError, match="declares no task"):
        app.dags()
    for bad in ("", "a b", "x" * 64, "café"):
        with pytest.raises(ValidationError, match="an app's name"):
            App(bad)


def test_load_app_finds_it_or_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one_app.py").write_text("import shardsched\napp = shardsched.App('one')\n")
    (tmp_path / "no_app.py").write_text("x = 1\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('boom')\n")
    try:
        assert load_app("one_app:app").name == "one"
        assert load_app("one_app").name == "one"
        for spec, said in (
            ("no_app", "holds 0 shardsched.App"),
            ("no_app:x", "x is int, not a shardsched.App"),
            ("raises", "RuntimeError: boom"),
            (":app", "MODULE:ATTRIBUTE"),
        ):
            with pytest.raises(ValueError, match=said):
                load_app(spec)
    finally:
        for name in ("one_app", "no_app", "raises"):
            sys.modules.pop(name, None)
