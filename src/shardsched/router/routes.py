"""The route table: every HTTP route once, gathered from the resource modules that hold
each route beside its handler. :mod:`.app` builds the starlette routes from it and
:mod:`.openapi` the OpenAPI document, so the two cannot drift. The order here is the
order of the document's paths."""

from __future__ import annotations

from shardsched.router import (
    apps,
    calendars,
    concurrency,
    dags,
    events,
    jobs,
    notify,
    runs,
    status,
    ticks,
    tokens,
    triggers,
    workers,
)
from shardsched.router.operation import Operation

OPERATIONS: tuple[Operation, ...] = (
    *jobs.ROUTES,
    *ticks.ROUTES,
    *runs.ROUTES,
    *events.ROUTES,
    *triggers.ROUTES,
    *calendars.ROUTES,
    *dags.ROUTES,
    *workers.ROUTES,
    *status.ROUTES,
    *tokens.ROUTES,
    *concurrency.ROUTES,
    *notify.ROUTES,
    *apps.ROUTES,
)
