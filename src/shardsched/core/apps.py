"""Schedules declared in code, next to their handlers: ``shardsched.App``.

An app is an owner: the jobs and DAGs it declares form an apply set of its own (label
``apply-set: app:<name>``), and ``shardsched deploy module:app`` (ops/apps/deploy.py)
makes the service match it, creating, changing (a new version), leaving or pruning only
what carries that label. Each decorated function is the handler of what it declares
(command ``handler:<app>.<function>``), found by a worker that imports the module
(worker/handlers.py reads :func:`app_handler`); the function itself is returned as it
was, so it stays callable in tests.

This module only declares: building a spec validates it as the API would (a bad
declaration is a ValidationError at import, naming the function), and nothing here does
I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from shardsched.core.app_sets import APPLY_SET, apply_set_of, check_app_name
from shardsched.core.dag import validate_dag
from shardsched.core.durations import parse_duration
from shardsched.core.errors import ValidationError
from shardsched.core.field_errors import field_error
from shardsched.core.ids import dag_id_of
from shardsched.core.models import TASK_NAME, DagSpec, JobSpec, TaskSpec
from shardsched.core.schedule_kinds import Schedule
from shardsched.core.validation import (
    check_dag_id,
    check_job_id,
    validate_schedule,
    validate_spec,
)

#: A command that names an in-process handler (worker/handlers.py).
HANDLER_PREFIX = "handler:"

F = TypeVar("F", bound=Callable[..., Any])

#: Every handler an App declared in this process, by handler name.
_handlers: dict[str, Callable[..., Any]] = {}


def app_handler(name: str) -> Callable[..., Any] | None:
    """The function an App declared as handler ``name`` (None: no App declared it)."""
    return _handlers.get(name)


def schedule_of(
    where: str,
    cron: str | None,
    every: float | str | None,
    at: datetime | str | None,
    schedule: Schedule | dict[str, Any] | None,
    tz: str | None,
) -> dict[str, Any]:
    """The schedule a declaration gives in exactly one of its four ways, as the API's
    JSON takes it."""
    given = [k for k, v in (("cron", cron), ("every", every), ("at", at), ("schedule", schedule))
             if v is not None]  # fmt: skip
    if len(given) != 1:
        raise ValidationError(
            f"{where}: give exactly one of cron=, every=, at= or schedule=,"
            f" not {', '.join(given) or 'none'}",
            "$.schedule",
        )
    if tz is not None and cron is None:
        raise ValidationError(f"{where}: tz= goes with cron= (a schedule= says its own)", "$.tz")
    if cron is not None:
        return {"type": "cron", "expression": cron, "timezone": tz or "UTC"}
    if every is not None:
        try:
            seconds = parse_duration(every) if isinstance(every, str) else float(every)
        except ValueError as exc:
            raise ValidationError(f"{where}: every= {exc}", "$.schedule.every_s") from None
        return {"type": "interval", "every_s": seconds}
    if at is not None:
        return {"type": "once", "at": at.isoformat() if isinstance(at, datetime) else at}
    if isinstance(schedule, msgspec.Struct):
        out: dict[str, Any] = msgspec.to_builtins(schedule)
        return out
    assert isinstance(schedule, dict)
    return dict(schedule)


def _retries(where: str, fields: dict[str, Any], retries: int | None) -> None:
    """``retries=N``: N attempts after the first (the spec's ``retry_policy.max_attempts``
    is N + 1, the other fields their defaults)."""
    if retries is None:
        return
    if "retry_policy" in fields:
        raise ValidationError(f"{where}: give retries= or retry_policy=, not both", "$.retries")
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 99:
        raise ValidationError(f"{where}: retries= is a whole number 0-99", "$.retries")
    fields["retry_policy"] = {"max_attempts": retries + 1}


def _built(where: str, body: dict[str, Any], kind: type[Any]) -> Any:
    try:
        return msgspec.convert(body, kind)
    except msgspec.ValidationError as exc:
        err = field_error(exc)
        raise ValidationError(f"{where}: {err.message}", err.field) from None


def _labelled(where: str, app: str, labels: dict[str, str] | None) -> dict[str, str]:
    labels = dict(labels or {})
    if APPLY_SET in labels:
        raise ValidationError(f"{where}: the label {APPLY_SET} is the app's own", "$.labels")
    labels[APPLY_SET] = apply_set_of(app)
    return labels


class DagDecl:
    """A DAG an app declares; its tasks are declared with :meth:`task` on their
    handlers, in order, each naming the tasks it depends on (their names or their
    functions)."""

    def __init__(self, app: App, dag_id: str, fields: dict[str, Any]) -> None:
        self.app = app
        self.id = dag_id
        self._fields = fields
        self._tasks: dict[str, dict[str, Any]] = {}
        self._names: dict[Callable[..., Any], str] = {}

    def task(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        depends_on: Iterable[str | Callable[..., Any]] = (),
        retries: int | None = None,
        queue: str | None = None,
        **fields: Any,
    ) -> Any:
        """Declare the decorated function as a task of this DAG (its handler), named
        ``name`` (default: the function's name), run after ``depends_on``."""

        def declare(fn: F) -> F:
            task = name or fn.__name__
            where = f"{self.app.name}: task {task!r} of DAG {self.id!r}"
            if not isinstance(task, str) or not TASK_NAME.match(task):
                raise ValidationError(
                    f"{where}: a task's name is letters, digits, '_' and '-'", "$.name"
                )
            if task in self._tasks:
                raise ValidationError(f"{where}: declared twice", "$.name")
            after = [d if isinstance(d, str) else self._names.get(d, "") for d in depends_on]
            unknown = [
                getattr(d, "__name__", str(d))
                for d, n in zip(depends_on, after, strict=True)
                if not n
            ]
            if unknown:
                raise ValidationError(
                    f"{where}: depends on {', '.join(unknown)}, not a task of this DAG",
                    "$.depends_on",
                )
            body = dict(fields)
            _retries(where, body, retries)
            if queue is not None:
                body["queue"] = queue
            handler = f"{self.app.name}.{self.id}.{task}"
            body.update(name=task, command=HANDLER_PREFIX + handler, depends_on=after)
            _built(where, body, TaskSpec)  # each task checked where it is declared
            self._tasks[task] = body
            self._names[fn] = task
            _handlers[handler] = fn
            return fn

        return declare if fn is None else declare(fn)

    def spec(self) -> DagSpec:
        """The DAG's definition, as ``PUT /api/v1/dags/{id}`` takes it."""
        where = f"{self.app.name}: DAG {self.id!r}"
        if not self._tasks:
            raise ValidationError(f"{where}: declares no task (@{self.id}.task)", "$.tasks")
        body = {**self._fields, "tasks": list(self._tasks.values())}
        spec: DagSpec = _built(where, body, DagSpec)
        try:  # its schedule and its tasks' graph, as the service checks them
            validate_schedule(spec.schedule)
            validate_dag(spec)
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc.message}", exc.field) from None
        return spec


class App:
    """The owner of a set of jobs and DAGs declared in code.

    >>> app = App("billing")
    >>> @app.job(cron="0 2 * * *", tz="Europe/Berlin", retries=3, queue="db")
    ... def nightly_invoices(ctx): ...
    """

    def __init__(self, name: str) -> None:
        check_app_name(name)
        self.name = name
        self._jobs: dict[str, JobSpec] = {}
        self._dags: dict[str, DagDecl] = {}

    def __repr__(self) -> str:
        return f"App({self.name!r}: {len(self._jobs)} jobs, {len(self._dags)} DAGs)"

    @property
    def apply_set(self) -> str:
        return apply_set_of(self.name)

    def job(
        self,
        fn: F | None = None,
        *,
        id: str | None = None,
        name: str | None = None,
        cron: str | None = None,
        every: float | str | None = None,
        at: datetime | str | None = None,
        schedule: Schedule | dict[str, Any] | None = None,
        tz: str | None = None,
        retries: int | None = None,
        queue: str | None = None,
        labels: dict[str, str] | None = None,
        **fields: Any,
    ) -> Any:
        """Declare the decorated function as a job (and its handler): ``id`` (default:
        the function's name), one of ``cron`` (with ``tz``), ``every`` (seconds or
        ``"1h"``), ``at`` or ``schedule``; ``retries`` after the first attempt; any other
        field of a job (``timeout_s``, ``catchup``, ``overlap``, ``args``…) as the API
        takes it."""

        def declare(fn: F) -> F:
            job_id = id or fn.__name__
            where = f"{self.name}: job {job_id!r}"
            try:
                check_job_id(job_id)
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.message} (give id=)", "$.id") from None
            if job_id in self._jobs:
                raise ValidationError(f"{where}: declared twice in the app", "$.id")
            body = dict(fields)
            _retries(where, body, retries)
            if queue is not None:
                body["queue"] = queue
            handler = f"{self.name}.{fn.__name__}"
            no_clock = body.get("on") and (cron, every, at, schedule) == (None,) * 4
            body.update(
                name=name or job_id,
                command=HANDLER_PREFIX + handler,
                schedule=None if no_clock else schedule_of(where, cron, every, at, schedule, tz),
                labels=_labelled(where, self.name, labels),
            )
            spec: JobSpec = _built(where, body, JobSpec)
            try:
                validate_spec(spec)
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.message}", exc.field) from None
            self._jobs[job_id] = spec
            _handlers[handler] = fn
            return fn

        return declare if fn is None else declare(fn)

    def dag(
        self,
        dag_id: str | Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        cron: str | None = None,
        every: float | str | None = None,
        at: datetime | str | None = None,
        schedule: Schedule | dict[str, Any] | None = None,
        tz: str | None = None,
        labels: dict[str, str] | None = None,
        **fields: Any,
    ) -> Any:
        """Declare a DAG: ``app.dag("etl", cron=…)`` returns it, and ``@app.dag(cron=…)``
        on a function declares one named after the function and returns it; either way
        its tasks are declared with ``@etl.task(depends_on=[…])``."""
        if callable(dag_id):
            return self.dag(cron=cron, every=every, at=at, schedule=schedule, tz=tz)(dag_id)

        def declare(fn: Callable[..., Any] | None) -> DagDecl:
            any_id = dag_id if isinstance(dag_id, str) else getattr(fn, "__name__", "")
            where = f"{self.name}: DAG {any_id!r}"
            try:
                check_dag_id(any_id)
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.message}", "$.id") from None
            stored = dag_id_of(any_id)
            if stored in self._dags:
                raise ValidationError(f"{where}: declared twice in the app", "$.id")
            body = dict(fields)
            no_clock = body.get("on") and (cron, every, at, schedule) == (None,) * 4
            body.update(
                name=name or any_id,
                schedule={"type": "triggered"}
                if no_clock
                else schedule_of(where, cron, every, at, schedule, tz),
                labels=_labelled(where, self.name, labels),
            )
            decl = self._dags[stored] = DagDecl(self, any_id, body)
            return decl

        return declare(None) if isinstance(dag_id, str) else declare

    def jobs(self) -> list[tuple[str, JobSpec]]:
        """Each job the app declares, by id."""
        return list(self._jobs.items())

    def dags(self) -> list[tuple[str, DagSpec]]:
        """Each DAG the app declares, by its stored id (``dag_<id>``)."""
        return [(dag_id, decl.spec()) for dag_id, decl in self._dags.items()]

    def specs(self) -> list[tuple[str, JobSpec]]:
        """The app's jobs, for the test kit (shardsched.testing) as for a deploy."""
        return self.jobs()


def load_app(spec: str) -> App:
    """The App ``module:attr`` names (``module`` alone: the one App the module holds),
    imported with the working directory on the path as ``celery -A`` and ``uvicorn`` do;
    ValueError saying what is wrong."""
    import importlib
    import os
    import sys

    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise ValueError(f"{spec!r}: name the app as MODULE:ATTRIBUTE (billing.jobs:app)")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ValidationError as exc:  # a declaration of the app is wrong
        raise ValueError(f"{module_name}: {exc}") from None
    except (Exception, SystemExit) as exc:  # the user's module: any error of its own
        raise ValueError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.pop(0)
    if attr:
        found = getattr(module, attr, None)
        if not isinstance(found, App):
            what = "nothing" if found is None else type(found).__name__
            raise ValueError(f"{spec}: {attr} is {what}, not a shardsched.App")
        return found
    apps = [v for v in vars(module).values() if isinstance(v, App)]
    if len(apps) != 1:
        raise ValueError(
            f"{module_name} holds {len(apps)} shardsched.App objects: name one, {module_name}:app"
        )
    return apps[0]


def an_app(app: object) -> App:
    """``app`` if it is an App; TypeError saying what was given otherwise (both clients'
    ``deploy_app`` answer a wrong argument alike)."""
    if not isinstance(app, App):
        raise TypeError(f"deploy_app takes a shardsched.App, not {type(app).__name__}")
    return app
