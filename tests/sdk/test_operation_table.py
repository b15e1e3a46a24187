"""Every client binds the one table of operations (sdk/operations.py), under the same
names, and every plan written is in the table: a client cannot drift from another."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from shardsched.sdk import AsyncClient, Client, plans
from shardsched.sdk.operations import DRIVER_METHODS, OPERATIONS, PARTS

#: Every module of sdk/plans (one per resource), found by walking the package.
PLAN_MODULES = tuple(
    importlib.import_module(f"{plans.__name__}.{m.name}")
    for m in pkgutil.iter_modules(plans.__path__)
)


def bound_plans(client: type) -> dict[str, object]:
    """The client's methods that drive a plan, by name, with the plan they drive."""
    found = {}
    for name, member in inspect.getmembers(client):
        plan = getattr(member, "__wrapped__", None)
        if plan is not None and inspect.getmodule(plan) in PLAN_MODULES:
            found[name] = plan
    return found


@pytest.mark.parametrize("client", [Client, AsyncClient])
def test_a_client_binds_every_operation_of_the_table_and_no_other(client: type) -> None:
    bound = bound_plans(client)
    assert sorted(set(OPERATIONS) - set(bound)) == [], "operations this client lacks"
    assert sorted(set(bound) - set(OPERATIONS)) == [], "methods the table does not list"
    wrong = [n for n, plan in bound.items() if plan is not OPERATIONS[n]]
    assert wrong == [], "bound to another plan than the table's"
    for name in DRIVER_METHODS:
        assert callable(getattr(client, name, None)), name


def test_the_clients_bind_the_same_methods() -> None:
    assert len(PLAN_MODULES) >= 7
    assert bound_plans(Client) == bound_plans(AsyncClient)


def test_every_plan_written_is_in_the_table() -> None:
    """A public function of a plan module that returns a Plan is an operation (or a part
    the table names): a new one not in the table would reach no client."""
    listed = set(OPERATIONS.values()) | set(PARTS)
    unlisted = []
    for module in PLAN_MODULES:
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            returns = str(fn.__annotations__.get("return", ""))
            own = fn.__module__ == module.__name__ and not name.startswith("_")
            if own and returns.startswith("Plan[") and fn not in listed:
                unlisted.append(f"{module.__name__}.{name}")
    assert unlisted == []


def test_the_check_would_see_a_missing_method() -> None:
    """The comparison is not vacuous: a client without one operation is found."""

    class Lacking(Client):
        pass

    Lacking.get_job = lambda self, job_id: None  # type: ignore[method-assign,assignment]
    assert "get_job" not in bound_plans(Lacking)
    assert len(bound_plans(Client)) == len(OPERATIONS) == 64


def test_the_http_clients_send_a_route_for_every_operation_with_its_plans_arguments() -> None:
    """``Client("https://…")`` has every operation of the table, each with exactly the
    arguments (names, order, kinds, defaults, types) and result type of its plan."""
    from shardsched.sdk.http import AsyncHttpClient, HttpClient
    from shardsched.sdk.http.routes import ROUTES

    assert sorted(set(OPERATIONS) - set(ROUTES)) == [], "operations with no route"
    for client in (HttpClient, AsyncHttpClient):
        for name in [*OPERATIONS, *DRIVER_METHODS]:
            assert callable(getattr(client, name, None)), (client.__name__, name)
        for name in OPERATIONS:
            assert getattr(client, name).__wrapped__ is ROUTES[name], name
    for name, plan in OPERATIONS.items():
        planned = list(inspect.signature(plan).parameters.values())[1:]  # less the handle
        routed = list(inspect.signature(ROUTES[name]).parameters.values())
        assert [(p.name, p.kind, p.default, p.annotation) for p in routed] == [
            (p.name, p.kind, p.default, p.annotation) for p in planned
        ], name
        answer = ROUTES[name].__annotations__["return"]
        assert answer.removeprefix("HttpCall[") == plan.__annotations__["return"].removeprefix(
            "Plan["
        ), name


def test_a_url_picks_the_transport() -> None:
    from shardsched.sdk.http import HttpClient

    with Client("http://127.0.0.1:9", token="t") as client:
        assert isinstance(client, HttpClient)
        assert client.options.endpoint.token == "t"
