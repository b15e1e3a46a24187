"""Every operation of the SDK's table as an API request.

A route has the very signature of its plan (:mod:`shardsched.sdk.plans`) less the handle,
and returns an :class:`~shardsched.sdk.http.calls.HttpCall` of what the plan returns, so a
program moves from ``Client("redis://…")`` to ``Client("https://…", token=…)`` changing no
call; ``tests/sdk/test_operation_table.py`` fails when a route is missing or its
arguments differ from its plan's. A route validates nothing the service validates: the
API answers 422 naming the field, raised as the Redis SDK raises it (ValidationError).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardsched.sdk.http.calls import HttpCall
from shardsched.sdk.http.routes import apps, config, dags, events, jobs, runs
from shardsched.sdk.operations import OPERATIONS

_MODULES = (jobs, runs, dags, config, apps, events)

#: The route of each operation of the table, by the table's names.
ROUTES: dict[str, Callable[..., HttpCall[Any]]] = {
    name: getattr(module, name)
    for name in OPERATIONS
    for module in _MODULES
    if callable(getattr(module, name, None))
}
